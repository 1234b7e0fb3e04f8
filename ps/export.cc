#include "ps/export.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/wire/codec.h"
#include "common/wire/layout_proto.h"
#include "ps/checkpoint.h"

namespace sketchps::ps {

absl::StatusOr<CheckpointedModel> LoadCheckpointedModel(const std::string& dir, const std::string& job_id,
                                                        std::uint32_t shards, const FileKey* key) {
  CheckpointedModel model;
  for (std::uint32_t s = 0; s < shards; ++s) {
    SKETCHPS_ASSIGN_OR_RETURN(LoadedCheckpoint loaded, LoadLatest(dir, job_id, s, key));
    const v1::ShardCheckpoint& c = loaded.checkpoint;
    SKETCHPS_ASSIGN_OR_RETURN(LayerTable layers, LayersFromProto(c.layers(), loaded.path));
    if (s == 0) {
      model.rounds_applied = c.rounds_applied();
      model.layers = layers;
    } else if (c.rounds_applied() != model.rounds_applied || !SameLayers(layers, model.layers)) {
      return absl::FailedPreconditionError(absl::StrCat(loaded.path, ": holds round ", c.rounds_applied(),
                                                        " of its layout, shard 0 round ", model.rounds_applied,
                                                        " (a run still going, or shards of different jobs?)"));
    }
    if (c.range_lo() != model.weights.size() || c.range_hi() < c.range_lo()) {
      return absl::FailedPreconditionError(absl::StrCat(loaded.path, ": range [", c.range_lo(), ", ", c.range_hi(),
                                                        ") does not continue the shards before it at ",
                                                        model.weights.size()));
    }
    SKETCHPS_ASSIGN_OR_RETURN(auto weights, ParseF32Bytes(c.weights(), c.range_hi() - c.range_lo(), loaded.path));
    model.weights.insert(model.weights.end(), weights.begin(), weights.end());
  }
  if (model.weights.size() != model.layers.dim()) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, ": the shards hold ", model.weights.size(), " of ", model.layers.dim(), " parameters"));
  }
  return model;
}

}  // namespace sketchps::ps
