// Shard: the state of one parameter-server shard, shared by the gRPC server (server/) and the
// in-process hub: a PhaseTable with its Reducer, and the master copy of the shard's range of the
// weights, which it updates with the replicated optimizer whenever a round's final phase completes
// (G_t = MeanAggregate of that phase's result), exactly as every worker replica does.
//
// A restarted shard is built from its saved state (rounds_applied, weights, velocity and the final
// result of its last round, which is seeded into the table so late workers can still fetch it).
// on_applied, when set, sees a snapshot after every applied round, before any worker receives that
// round's result (the server checkpoints there).
//
// Thread-safe: the table serializes phases; the master copy has its own lock.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "kernels/backend.h"
#include "engine/optimizer.h"
#include "engine/phase_table.h"
#include "engine/reduce.h"

namespace sketchps {

// Fractional epoch of a round, the same on every replica: round / rounds_per_epoch.
double EpochOfRound(std::uint64_t round, double rounds_per_epoch);

// The final phase result of a round, as restored after a restart.
struct FinalResult {
  PhaseKey key;
  std::shared_ptr<const PhaseResult> result;
};

// The master copy after a round was applied.
struct ShardSnapshot {
  std::uint64_t rounds_applied = 0;
  std::vector<float> weights;
  std::vector<float> velocity;  // empty without momentum
  std::uint64_t checksum = 0;   // WeightsChecksum(weights)
  FinalResult last;             // the round's final phase result
};

struct ShardOptions {
  std::uint32_t num_workers = 1;
  std::vector<float> initial_weights;  // the range's weights; its size is the range length
  OptimizerConfig optimizer;
  bool global_momentum = true;         // false for local-momentum schemes (optimizer momentum 0)
  double rounds_per_epoch = 1.0;
  // Restored state (a restart): rounds already in initial_weights, the momentum buffer (empty:
  // zeros) and the last round's final result (seeded into the table when set).
  std::uint64_t rounds_applied = 0;
  std::vector<float> velocity;
  std::optional<FinalResult> last;
  std::function<void(const ShardSnapshot&)> on_applied;
};

class Shard {
 public:
  explicit Shard(ShardOptions options);

  PhaseTable& table() { return *table_; }
  std::uint64_t dim() const { return dim_; }

  // A copy of the master weights and the number of rounds applied to them.
  std::vector<float> Weights() const;
  std::vector<float> Velocity() const;
  std::uint64_t rounds_applied() const;
  // WeightsChecksum of the master weights (cached: updated once per applied round).
  std::uint64_t checksum() const;

 private:
  absl::Status ApplyFinal(const PhaseKey& key, const PhaseResult& result);

  const ShardOptions options_;
  const std::uint64_t dim_;
  std::shared_ptr<Reducer> reducer_;
  std::unique_ptr<PhaseTable> table_;

  mutable absl::Mutex master_mu_;
  kernels::DeviceArray<float> master_ ABSL_GUARDED_BY(master_mu_);
  Optimizer optimizer_ ABSL_GUARDED_BY(master_mu_);
  std::uint64_t rounds_applied_ ABSL_GUARDED_BY(master_mu_) = 0;
  std::uint64_t checksum_ ABSL_GUARDED_BY(master_mu_) = 0;
};

}  // namespace sketchps
