// PhaseTable: the rendezvous of one shard's phases, shared by the in-process aggregator, the
// parameter server and the tests.
//
// Workers Submit() their contribution to (round, phase); when the last of the expected workers has
// submitted, the table reduces the contributions in worker-id order (so the result is deterministic)
// and publishes one result that every Await() or Subscribe() of that key receives.
//
// Where the work runs: Submit() only validates and stores, under the table's lock. The reduction, the
// final hook (a master-copy update) and the publication run as one task outside the lock: on the
// options' strand when one is given (the parameter server: one strand per shard, so phases of a
// shard are reduced one at a time and pushes keep being admitted meanwhile), else on the thread of
// the last contributor.
//
// Rules it enforces (each violation is a Status, never a crash; nothing is stored on a violation):
//   - a worker id outside [0, num_workers) is InvalidArgument;
//   - a repeated Submit of the same (round, phase, worker) is acknowledged and ignored (idempotent
//     retries), even after the phase completed; a repeat whose spec differs is InvalidArgument;
//   - contributions to one phase must agree on the PhaseSpec (InvalidArgument naming the worker);
//   - admission: `admit` (when set) checks each payload against what the phase expects (the spec,
//     the previous phase's result and the first payload already held) before it is stored, so a
//     payload that could not be reduced with the others is refused alone, with InvalidArgument
//     naming the field, and the phase stays open for valid contributions;
//   - a key older than the retention window (rounds before newest_round - kRetainRounds) is
//     FailedPrecondition (Reason::kStaleRound): stale pushes are rejected, not applied;
//   - phase p > 0 needs the completed result of phase p - 1 of the same round: a Submit without it
//     is rejected at once with ReplayRoundError() (the shard restarted and lost the round's earlier
//     phases; the worker replays the round from phase 0);
//   - with options.first_round set (a table in front of a master copy), rounds are applied in order:
//     a phase of a round that was already applied, other than a retry of one of its completed
//     phases, is FailedPrecondition (IsRoundApplied: applied rounds are immutable), and a phase of a
//     round beyond the next one to apply is FailedPrecondition (IsRoundAhead). An auxiliary phase
//     (engine/aggregator.h) may also belong to the last applied round.
// Round deadline (options.deadline > 0; the job key ps.round_deadline_seconds): a scheme phase (not an
// auxiliary one) that has waited `deadline` since its first contribution, and holds contributions from
// at least half of the workers it still expects, is closed by CloseExpired() without the others. They
// are left out of the rest of the round: the phase and every later phase of that round reduce them as
// skips (no payload), and each result lists them (PhaseResult::excluded). A Submit of any scheme phase
// of that round from a worker left out of it is acknowledged and stores nothing (the caller then
// awaits the phase's result and learns from `excluded` that it was left out; a worker that needs only
// G_t awaits the final phase directly). An auxiliary phase waits for every member, left-out ones
// included (a late worker still sends its evaluation counts), except that CloseExpired closes it
// without the members that the round's deadline left out once it has waited `deadline` and holds at
// least half of the members: a worker that died for good is left out of every round, and without
// this it would hold the evaluation and the job's end for ever. Its result lists those it was closed
// without (excluded); their late Submit is acknowledged as a retry. Without a deadline nothing is
// ever left out.
// Elastic membership (options.elastic; the job key ps.elastic): each worker id is a slot that is a
// member of the rounds [from, until). Slots [0, options.elastic->initial_members) are members from
// round 0, the others from no round until they Join; a member Leaves before a round. Every rule
// above that counts "the workers" counts the members of the key's round: a phase completes when
// every member (not left out) has contributed, an auxiliary phase when every member has; non-members
// reduce as skips and each result lists them (PhaseResult::absent). A Submit from a worker that is not
// a member of the key's round is FailedPrecondition with Reason::kNotMember. A change of membership
// completes every open phase that then has all it waits for. Without options.elastic every worker is
// a member of every round and Join/Leave are FailedPrecondition.
// A reduction or final hook that fails anyway fails its phase: every waiter receives that error.
// Await() waits until the result exists or the deadline passes (DeadlineExceeded). Subscribe() is the
// non-blocking form for asynchronous servers: the callback runs once, with the result or the phase's
// error, on the thread that publishes (or at once when it is already complete).
//
// Thread-safe. The table must outlive the tasks it posts to the strand (drain the strand first).
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
#include "common/reason.h"
#include "engine/phase.h"
#include "engine/strand.h"

namespace sketchps {

// The FailedPrecondition a shard returns when it lacks a round's earlier phases, with
// Reason::kReplayRound (common/reason.h: IsReplayRound). The other refusals carry their Reason too:
// kStaleRound, kRoundApplied (IsRoundApplied) and kRoundAhead (IsRoundAhead).
absl::Status ReplayRoundError(std::uint64_t round, std::uint32_t phase);

struct PhaseKey {
  std::uint64_t round = 0;
  std::uint32_t phase = 0;
  friend auto operator<=>(const PhaseKey&, const PhaseKey&) = default;
};

// Reduces one phase's contributions, given in worker-id order (skips included); `previous` is the
// result of the round's previous phase (nullptr for phase 0).
using ReduceFn = std::function<absl::StatusOr<PhaseResult>(const PhaseSpec&, const std::vector<const Contribution*>&,
                                                           const PhaseResult* previous)>;
// Called once when a round's final phase has been reduced (e.g. to update a master copy); returns
// the result to publish (the hook may replace it, e.g. by an empty update). An error fails the phase.
using FinalFn = std::function<absl::StatusOr<std::shared_ptr<const PhaseResult>>(const PhaseKey&, PhaseResult)>;
// Checks one payload before it enters a phase: `previous` as for ReduceFn, `first` the payload of
// the lowest worker already held (nullptr when none). InvalidArgument naming the field.
using AdmitFn = std::function<absl::Status(const PhaseSpec&, const PayloadValue&, const PhaseResult* previous,
                                           const PayloadValue* first)>;

// Elastic membership's start: the slots [0, initial_members) are members from round 0.
struct ElasticRoster {
  std::uint32_t initial_members = 1;
};

// One slot's membership: the rounds [from, until) (kNever: unbounded or not yet).
struct MemberSpan {
  static constexpr std::uint64_t kNever = ~std::uint64_t{0};
  std::uint64_t from = kNever;
  std::uint64_t until = kNever;
  bool Contains(std::uint64_t round) const { return from <= round && round < until; }
  friend bool operator==(const MemberSpan&, const MemberSpan&) = default;
};

struct PhaseTableOptions {
  std::uint32_t num_workers = 1;
  ReduceFn reduce;
  FinalFn on_final;          // optional
  AdmitFn admit;             // optional: without it every decodable payload is stored
  Strand* strand = nullptr;  // where reductions run (nullptr: the last contributor's thread)
  // Rounds applied before the table starts (a master copy's); unset: no round-order rules.
  std::optional<std::uint64_t> first_round;
  // The round deadline (above); zero: none.
  absl::Duration deadline = absl::ZeroDuration();
  // Elastic membership (above); unset: every worker is a member of every round.
  std::optional<ElasticRoster> elastic;
};

class PhaseTable {
 public:
  static constexpr std::uint64_t kRetainRounds = 2;

  explicit PhaseTable(PhaseTableOptions options);
  // Tables without admission, hook or strand (tests).
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

  // A phase CloseExpired closed, and the workers it left out (not those left out by an earlier phase);
  // for an auxiliary phase, the left-out members it was closed without.
  struct Closed {
    PhaseKey key;
    std::vector<std::uint32_t> left_out;
    bool auxiliary = false;
  };
  // Closes every scheme phase whose deadline has passed at `now` (see above). Call it periodically
  // (the parameter server: a few times per deadline); no-op without a deadline.
  std::vector<Closed> CloseExpired(absl::Time now);
  // Whether a deadline has left `worker` out of `round` (false once the round is forgotten).
  bool Excluded(std::uint64_t round, std::uint32_t worker) const;

  // Elastic membership. Join makes `worker` a member from round R, the first round >= max(from, the
  // rounds applied) none of whose scheme phases has closed, and returns R; a slot that was a member
  // before and rejoins (a restarted worker) starts again at R. FailedPrecondition: the table is not
  // elastic, the slot has left, or it already holds a contribution to an open round (it is taking
  // part: the answer would move it under its own feet).
  absl::StatusOr<std::uint64_t> Join(std::uint32_t worker, std::uint64_t from);
  // Ends `worker`'s membership before round `until`. FailedPrecondition: not elastic, not a member, or
  // it has already contributed to a scheme phase of round `until` or later. Idempotent.
  absl::Status Leave(std::uint32_t worker, std::uint64_t until);
  bool IsMember(std::uint64_t round, std::uint32_t worker) const;
  // Every slot's span (checkpoints, tests); every slot {0, kNever} without options.elastic.
  std::vector<MemberSpan> Roster() const;
  // Restores a roster (a restarted shard's checkpoint); InvalidArgument when its size is not
  // num_workers. No-op without options.elastic.
  absl::Status SetRoster(std::vector<MemberSpan> roster);
  // Slots that are members now or later: joined (or initial) and not left.
  std::uint32_t ActiveMembers() const;

  // Whether `worker` has already contributed to `key` (for duplicate-push accounting).
  bool HasContribution(const PhaseKey& key, std::uint32_t worker) const;
  // Whether any worker has contributed to `key` (or it is complete).
  bool HasAnyContribution(const PhaseKey& key) const;
  // Number of phases currently held (bounded by the retention window; tests pin it).
  std::size_t HeldPhases() const;
  // Rounds applied (options.first_round plus the final phases published since); 0 without it.
  std::uint64_t rounds_applied() const;

 private:
  struct Entry {
    std::vector<std::optional<Contribution>> contributions;
    std::uint32_t received = 0;
    bool reducing = false;  // every worker has contributed; the reduction task is posted
    bool done = false;
    bool auxiliary = false;  // an auxiliary phase (the deadline closes it only without left-out workers)
    absl::Time opened;       // when its first contribution was stored
    absl::Status status;
    std::shared_ptr<const PhaseResult> result;
    std::vector<ResultCallback> waiters;
  };
  // What the reduction task of one phase needs, moved out of the entry under the lock.
  struct Work {
    PhaseKey key;
    std::vector<Contribution> contributions;
    std::shared_ptr<const PhaseResult> previous;
    std::vector<std::uint32_t> excluded = {};  // the round's workers left out so far (PhaseResult::excluded)
    std::vector<std::uint32_t> absent = {};    // the round's non-members (PhaseResult::absent)
  };

  using Calls = std::vector<std::pair<ResultCallback, absl::StatusOr<std::shared_ptr<const PhaseResult>>>>;

  // InvalidArgument naming worker_id when it is not in [0, num_workers).
  absl::Status CheckWorker(std::uint32_t worker) const;
  static absl::StatusOr<std::shared_ptr<const PhaseResult>> Outcome(const Entry& entry);
  // Runs callbacks collected under the lock, after releasing it.
  static void Notify(Calls calls);
  absl::StatusOr<std::optional<Work>> Store(const PhaseKey& key, std::uint32_t worker, Contribution contribution,
                                            Calls& dropped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckOrder(const PhaseKey& key, bool auxiliary) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Admit(const PhaseKey& key, const Entry& entry, const Contribution& contribution) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const PhaseResult* PreviousResult(const PhaseKey& key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsOut(std::uint64_t round, std::uint32_t worker) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsMemberLocked(std::uint64_t round, std::uint32_t worker) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::uint32_t Members(std::uint64_t round) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Members of `round` not left out.
  std::uint32_t Expected(std::uint64_t round) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether an open auxiliary phase holds at least half of its round's members and waits only for
  // members the round's deadline left out (CloseExpired may then close it without them).
  bool WaitsOnlyForLeftOut(const PhaseKey& key, const Entry& entry) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Contributions an open phase waits for (its auxiliary-ness decides whether left-out workers count).
  std::uint32_t Needed(const PhaseKey& key, const Entry& entry) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a change of membership: takes every open phase that now holds all it waits for.
  std::vector<Work> TakeComplete() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `worker` holds a contribution to an open scheme phase of a round >= `round`.
  bool Contributed(std::uint32_t worker, std::uint64_t round) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the entry as reducing and moves its contributions (skips for workers left out) into a Work.
  Work Take(const PhaseKey& key, Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void Dispatch(Work work);
  void Finish(Work work);
  void Publish(const PhaseKey& key, absl::StatusOr<std::shared_ptr<const PhaseResult>> outcome, bool final_phase);

  absl::Status CheckFresh(const PhaseKey& key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(std::uint64_t newest_round, Calls& calls) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const PhaseTableOptions options_;

  mutable absl::Mutex mu_;
  std::map<PhaseKey, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::map<std::uint64_t, std::vector<bool>> out_ ABSL_GUARDED_BY(mu_);  // by round: left out by a deadline
  std::vector<MemberSpan> roster_ ABSL_GUARDED_BY(mu_);                  // by worker (elastic membership)
  std::uint64_t newest_round_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t applied_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sketchps
