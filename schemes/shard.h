// Shard: the state of one parameter-server shard, shared by the gRPC server (server/) and the
// in-process hub: a PhaseTable with its Reducer, and the master copy of the shard's range of the
// weights, which it updates with the replicated optimizer whenever a round's final phase completes
// (G_t = MeanAggregate of that phase's result), exactly as every worker replica does.
//
// Thread-safe: the table serializes phases; the master copy has its own lock.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "kernels/backend.h"
#include "schemes/optimizer.h"
#include "schemes/phase_table.h"
#include "schemes/reduce.h"

namespace sketchps {

// Fractional epoch of a round, the same on every replica: round / rounds_per_epoch.
double EpochOfRound(std::uint64_t round, double rounds_per_epoch);

struct ShardOptions {
  std::uint32_t num_workers = 1;
  std::vector<float> initial_weights;  // the range's weights; its size is the range length
  OptimizerConfig optimizer;
  bool global_momentum = true;         // false for local-momentum schemes (optimizer momentum 0)
  double rounds_per_epoch = 1.0;
};

class Shard {
 public:
  explicit Shard(ShardOptions options);

  PhaseTable& table() { return *table_; }
  std::uint64_t dim() const { return dim_; }

  // A copy of the master weights and the number of rounds applied to them.
  std::vector<float> Weights() const;
  std::uint64_t rounds_applied() const;

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
};

}  // namespace sketchps
