// In-process aggregation: P workers as threads of one process, one PhaseTable + Reducer per shard.
// Runs every scheme end to end without gRPC (tests, single-machine simulation, the reference the
// networked modes are compared with).
//
//   InProcessHub hub(num_workers, shard_map);
//   auto agg = hub.MakeAggregator(worker_id);   // one per worker thread
//
// The hub must outlive its aggregators. Hub methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "common/layout.h"
#include "schemes/aggregator.h"
#include "schemes/phase_table.h"

namespace sketchps {

class InProcessHub {
 public:
  InProcessHub(std::uint32_t num_workers, const ShardMap& shards);

  // `timeout` bounds each RunPhase wait (a worker that never arrives fails the phase, not hangs it).
  std::unique_ptr<Aggregator> MakeAggregator(std::uint32_t worker_id, absl::Duration timeout = absl::Seconds(60));

  std::uint32_t num_workers() const { return num_workers_; }
  std::uint32_t num_shards() const { return static_cast<std::uint32_t>(tables_.size()); }
  PhaseTable& table(std::uint32_t shard) { return *tables_[shard]; }

 private:
  const std::uint32_t num_workers_;
  std::vector<std::unique_ptr<PhaseTable>> tables_;
};

}  // namespace sketchps
