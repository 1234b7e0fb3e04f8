// PhaseTable: the rendezvous of one shard's phases, shared by the in-process aggregator, the
// parameter server and the tests.
//
// Workers Submit() their contribution to (round, phase); when the last of the expected workers has
// submitted, the table reduces the contributions in worker-id order (so the result is deterministic)
// and publishes one result that every Await() for that key returns.
//
// Rules it enforces (each violation is a Status, never a crash):
//   - a worker id outside [0, num_workers) is InvalidArgument;
//   - a repeated Submit of the same (round, phase, worker) is acknowledged and ignored (idempotent
//     retries), even after the phase completed; a repeat whose spec differs is InvalidArgument;
//   - contributions to one phase must agree on the PhaseSpec (InvalidArgument naming the worker);
//   - a key older than the retention window (rounds before newest_round - kRetainRounds) is
//     FailedPrecondition: stale pushes are rejected, not applied;
//   - a reduction error (mismatched payloads) fails the phase: every Await gets that error;
//   - phase p > 0 needs the completed result of phase p - 1 of the same round: a Submit without it
//     is rejected at once with ReplayRoundError() (the shard restarted and lost the round's earlier
//     phases; the worker replays the round from phase 0) and nothing is stored.
// Await() waits until the result exists or the deadline passes (DeadlineExceeded). Subscribe() is the
// non-blocking form for asynchronous servers: the callback runs once, with the result or the phase's
// error, on the thread that completes the phase (or at once when it is already complete).
//
// Thread-safe. The reduction runs on the thread of the last contributor, under the table's lock
// (phases of one shard are sequential, so nothing else would proceed meanwhile anyway).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/phase.h"

namespace sketchps {

// The FailedPrecondition a shard returns when it lacks a round's earlier phases; its message carries
// kReplayRoundMarker so that the marker survives transports that keep only code and message (gRPC).
inline constexpr char kReplayRoundMarker[] = "replay the round from phase 0";
absl::Status ReplayRoundError(std::uint64_t round, std::uint32_t phase);
bool IsReplayRound(const absl::Status& status);

struct PhaseKey {
  std::uint64_t round = 0;
  std::uint32_t phase = 0;
  friend auto operator<=>(const PhaseKey&, const PhaseKey&) = default;
};

// Reduces one phase's contributions, given in worker-id order (skips included); `previous` is the
// result of the round's previous phase (nullptr for phase 0).
using ReduceFn = std::function<absl::StatusOr<PhaseResult>(const PhaseSpec&, const std::vector<const Contribution*>&,
                                                           const PhaseResult* previous)>;
// Called once when a round's final phase has been reduced (e.g. to update a master copy). An error
// fails the phase.
using FinalFn = std::function<absl::Status(const PhaseKey&, const PhaseResult&)>;

class PhaseTable {
 public:
  static constexpr std::uint64_t kRetainRounds = 2;

  PhaseTable(std::uint32_t num_workers, ReduceFn reduce, FinalFn on_final = nullptr);

  absl::Status Submit(const PhaseKey& key, std::uint32_t worker, Contribution contribution);
  absl::StatusOr<std::shared_ptr<const PhaseResult>> Await(const PhaseKey& key, absl::Time deadline);

  using ResultCallback = std::function<void(absl::StatusOr<std::shared_ptr<const PhaseResult>>)>;
  // Calls `done` once the phase completes. Callbacks run outside the table's lock and must not block.
  // Stale keys call `done` at once with FailedPrecondition.
  void Subscribe(const PhaseKey& key, ResultCallback done);

  // Installs `result` as the completed outcome of `key` (a restarted shard restores the final result
  // of the last round it applied, so that workers that missed it can still fetch it). Every Submit
  // to that key is then acknowledged as a retry.
  void Seed(const PhaseKey& key, std::shared_ptr<const PhaseResult> result);

  // Whether `worker` has already contributed to `key` (for duplicate-push accounting).
  bool HasContribution(const PhaseKey& key, std::uint32_t worker) const;
  // Whether any worker has contributed to `key` (or it is complete).
  bool HasAnyContribution(const PhaseKey& key) const;
  // Number of phases currently held (bounded by the retention window; tests pin it).
  std::size_t HeldPhases() const;

 private:
  struct Entry {
    std::vector<std::optional<Contribution>> contributions;
    std::uint32_t received = 0;
    bool done = false;
    absl::Status status;
    std::shared_ptr<const PhaseResult> result;
    std::vector<ResultCallback> waiters;
  };

  using Calls = std::vector<std::pair<ResultCallback, absl::StatusOr<std::shared_ptr<const PhaseResult>>>>;

  static absl::StatusOr<std::shared_ptr<const PhaseResult>> Outcome(const Entry& entry);
  // Runs callbacks collected under the lock, after releasing it.
  static void Notify(Calls calls);
  absl::Status SubmitAndCollect(const PhaseKey& key, std::uint32_t worker, Contribution contribution, Calls& calls);

  absl::Status CheckFresh(const PhaseKey& key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::shared_ptr<const PhaseResult>> Reduce(const PhaseKey& key, const Entry& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Complete(const PhaseKey& key, Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(std::uint64_t newest_round, Calls& calls) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const std::uint32_t num_workers_;
  const ReduceFn reduce_;
  const FinalFn on_final_;

  mutable absl::Mutex mu_;
  std::map<PhaseKey, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::uint64_t newest_round_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sketchps
