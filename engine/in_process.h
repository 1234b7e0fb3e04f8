// In-process aggregation: P workers as threads of one process, one Shard (phase table, reducer,
// master copy) per shard range. Runs every scheme end to end without gRPC (tests, single-machine
// simulation, the reference the networked modes are compared with).
//
//   InProcessHub hub(num_workers, shard_map, initial_weights, optimizer, global_momentum, rpe);
//   auto agg = hub.MakeAggregator(worker_id);   // one per worker thread
//
// The hub must outlive its aggregators. Hub methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "common/layout.h"
#include "engine/aggregator.h"
#include "engine/optimizer.h"
#include "engine/shard.h"

namespace sketchps {

class InProcessHub {
 public:
  // initial_weights covers the whole vector; each shard takes its range as its master copy. `layers`
  // (the whole vector's) tells the optimizers which entries optimizer.no_decay exempts.
  InProcessHub(std::uint32_t num_workers, const ShardMap& shards, const std::vector<float>& initial_weights,
               const OptimizerConfig& optimizer, bool global_momentum, double rounds_per_epoch,
               const LayerTable& layers = {});

  // `timeout` bounds each RunPhase wait (a worker that never arrives fails the phase, not hangs it).
  std::unique_ptr<Aggregator> MakeAggregator(std::uint32_t worker_id, absl::Duration timeout = absl::Seconds(60));

  std::uint32_t num_workers() const { return num_workers_; }
  std::uint32_t num_shards() const { return static_cast<std::uint32_t>(shards_.size()); }
  PhaseTable& table(std::uint32_t shard) { return shards_[shard]->table(); }
  Shard& shard(std::uint32_t s) { return *shards_[s]; }
  // The master copies of all shards, concatenated.
  std::vector<float> MasterWeights() const;

 private:
  const std::uint32_t num_workers_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace sketchps
