// The trained model of a job from its shards' checkpoints (ps/checkpoint.h): each shard's newest
// valid checkpoint, joined into the whole flat parameter vector with the layer table the
// checkpoints carry. `sketchps export` turns it into a PyTorch state_dict (python/sketchps/export.py).
//
// Errors: NotFound naming a shard without a valid checkpoint in `dir`; FailedPrecondition when the
// shards hold different rounds or layer tables, or their ranges do not tile [0, d) in shard order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/layout.h"
#include "common/wire/file_key.h"

namespace sketchps::ps {

struct CheckpointedModel {
  std::uint64_t rounds_applied = 0;
  LayerTable layers;
  std::vector<float> weights;  // layers.dim() values
};

// `key`: the checkpoint key the shards wrote with (null: untagged checkpoints; ps/checkpoint.h).
absl::StatusOr<CheckpointedModel> LoadCheckpointedModel(const std::string& dir, const std::string& job_id,
                                                        std::uint32_t shards, const FileKey* key = nullptr);

}  // namespace sketchps::ps
