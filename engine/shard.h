// Shard: the state of one parameter-server shard, shared by the gRPC server (server/) and the
// in-process hub: a PhaseTable with its Reducer, and the master copy of the shard's range of the
// weights, which it updates with the replicated optimizer whenever a round's final phase completes
// (G_t = MeanAggregate of that phase's result), exactly as every worker replica does.
//
// Execution: with options.own_strand (the server), every reduction, master-copy update and
// publication runs on the shard's strand, one phase at a time, while the table keeps admitting
// pushes; without it (in-process hub, tests) they run on the thread of the last contributor.
// Rounds are applied in order; a phase of an applied round cannot be reopened (phase_table.h).
//
// Numeric safety: a round whose reduced result is not finite, or whose update would make the master
// copy (weights or momentum) non-finite, is refused: the shard publishes RefusedResult() instead (no
// gradient; every replica applies the same), counts it in AppliedRound::refused and leaves the
// previous master copy in place before applying the empty update. If even the empty update would
// make the master copy non-finite (momentum diverged), the round fails with DataLoss for every worker
// and nothing is applied, served or checkpointed.
//
// A restarted shard is built from its saved state (rounds_applied, weights, optimizer state, the
// reducer's state and the final result of its last round, which is seeded into the table so late
// workers can still fetch it).
//
// Reduction state (engine/reduce.h, kSketchMomentumError: FetchSGD's momentum and error sketches)
// lives in the shard's Reducer and belongs to the master copy: Snapshot() returns the state as of
// the round the snapshot's weights include (copied when the round is applied), and a round whose
// update the shard refuses (non-finite master copy) also puts the reducer's state back as it was
// before that round, so the state always matches the weights.
// on_applied, when set, runs after every applied round, before any worker receives that round's
// result (the server takes its checkpoint snapshot there, with Snapshot()).
//
// Thread-safe: the table serializes phases; the master copy has its own lock. Destroying the shard
// drains its strand first.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine/optimizer.h"
#include "engine/phase_table.h"
#include "engine/reduce.h"
#include "engine/strand.h"
#include "kernels/backend.h"

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
  std::vector<float> optimizer_state;  // engine/optimizer.h State(); empty: none
  ReductionState reduction_state;      // the reducer's state after those rounds (empty: none)
  std::uint64_t checksum = 0;          // WeightsChecksum(weights)
  FinalResult last;                    // the round's final phase result (unset before the first round)
};

// What on_applied learns about each applied round (no copies of the weights).
struct AppliedRound {
  std::uint64_t rounds_applied = 0;
  std::uint64_t checksum = 0;
  FinalResult last;
  bool refused = false;  // the round applied RefusedResult() (non-finite sum or update)
};

struct ShardOptions {
  std::uint32_t num_workers = 1;
  std::vector<float> initial_weights;  // the range's weights; its size is the range length
  OptimizerConfig optimizer;
  bool global_momentum = true;  // false for local-momentum schemes (optimizer momentum 0)
  LayerTable layers;            // the range's layers, offsets relative to its start (optimizer.no_decay)
  double rounds_per_epoch = 1.0;
  // Restored state (a restart): rounds already in initial_weights, the optimizer state (empty:
  // zeros) and the last round's final result (seeded into the table when set).
  std::uint64_t rounds_applied = 0;
  std::vector<float> optimizer_state;
  ReductionState reduction_state;  // the reducer's state after rounds_applied rounds (empty: none)
  std::optional<FinalResult> last;
  std::function<void(const AppliedRound&)> on_applied;
  bool own_strand = false;  // reduce, apply and publish on a strand of the shard's own
  // The round deadline of the shard's table (engine/phase_table.h; zero: none). Something must call
  // table().CloseExpired() for it to act (the parameter server's deadline ticker).
  absl::Duration round_deadline = absl::ZeroDuration();
  // Elastic membership of the table (engine/phase_table.h; unset: fixed) and a restored roster
  // (a checkpoint's; empty: the initial one). The roster's size must be num_workers.
  std::optional<ElasticRoster> elastic;
  std::vector<MemberSpan> roster;
};

class Shard {
 public:
  explicit Shard(ShardOptions options);
  ~Shard();

  PhaseTable& table() { return *table_; }
  const PhaseTable& table() const { return *table_; }
  std::uint64_t dim() const { return dim_; }

  // A copy of the master weights and the number of rounds applied to them.
  std::vector<float> Weights() const;
  std::vector<float> OptimizerState() const;
  // The reducer's state as of the last applied round (empty when the scheme keeps none).
  ReductionState reduction_state() const;
  std::uint64_t rounds_applied() const;
  // WeightsChecksum of the master weights (cached: updated once per applied round).
  std::uint64_t checksum() const;
  // Weights, optimizer state, rounds, checksum and last result, taken together (consistent).
  ShardSnapshot Snapshot() const;
  // Waits until every reduction posted so far has been published (no-op without a strand).
  void Drain();

 private:
  absl::StatusOr<std::shared_ptr<const PhaseResult>> ApplyFinal(const PhaseKey& key, PhaseResult result);
  // Applies `result` to the master copy; false (state unchanged) when the update would not be finite.
  absl::StatusOr<bool> TryApply(const PhaseKey& key, const PhaseResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(master_mu_);

  const ShardOptions options_;
  const std::uint64_t dim_;
  Reducer reducer_;
  std::unique_ptr<PhaseTable> table_;

  mutable absl::Mutex master_mu_;
  kernels::DeviceArray<float> master_ ABSL_GUARDED_BY(master_mu_);
  Optimizer optimizer_ ABSL_GUARDED_BY(master_mu_);
  std::uint64_t rounds_applied_ ABSL_GUARDED_BY(master_mu_) = 0;
  std::uint64_t checksum_ ABSL_GUARDED_BY(master_mu_) = 0;
  FinalResult last_ ABSL_GUARDED_BY(master_mu_);
  ReductionState reduction_state_ ABSL_GUARDED_BY(master_mu_);      // the reducer's, as of rounds_applied_
  kernels::DeviceArray<float> backup_ ABSL_GUARDED_BY(master_mu_);  // the weights before the round being applied
  kernels::Scratch scratch_;                                        // kernels' temporaries (under master_mu_)
  const kernels::Exec exec_{nullptr, &scratch_};

  // Last: destroyed first, so no task runs once the members above are gone.
  std::unique_ptr<Strand> strand_;
};

}  // namespace sketchps
