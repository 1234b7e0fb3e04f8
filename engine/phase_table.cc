#include "engine/phase_table.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sketchps {

absl::Status ReplayRoundError(std::uint64_t round, std::uint32_t phase) {
  return absl::FailedPreconditionError(absl::StrCat("round ", round, " phase ", phase,
                                                    ": this shard holds no result of the previous phase; ",
                                                    kReplayRoundMarker));
}

bool IsReplayRound(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition &&
         absl::StrContains(status.message(), kReplayRoundMarker);
}

PhaseTable::PhaseTable(std::uint32_t num_workers, ReduceFn reduce, FinalFn on_final)
    : num_workers_(num_workers), reduce_(std::move(reduce)), on_final_(std::move(on_final)) {}

absl::Status PhaseTable::CheckFresh(const PhaseKey& key) const {
  if (newest_round_ >= kRetainRounds && key.round < newest_round_ - kRetainRounds) {
    return absl::FailedPreconditionError(absl::StrCat("round ", key.round, " is stale: the shard is at round ",
                                                      newest_round_));
  }
  return absl::OkStatus();
}

absl::Status PhaseTable::Submit(const PhaseKey& key, std::uint32_t worker, Contribution contribution) {
  if (worker >= num_workers_) {
    return absl::InvalidArgumentError(absl::StrCat("worker_id ", worker, " is not in [0, ", num_workers_, ")"));
  }
  Calls calls;
  absl::Status status = SubmitAndCollect(key, worker, std::move(contribution), calls);
  Notify(std::move(calls));
  return status;
}

absl::Status PhaseTable::SubmitAndCollect(const PhaseKey& key, std::uint32_t worker, Contribution contribution, Calls& calls) {
  absl::MutexLock lock(&mu_);
  if (auto st = CheckFresh(key); !st.ok()) return st;
  if (auto it = entries_.find(key); it != entries_.end() && it->second.done) {
    return absl::OkStatus();  // every worker has contributed (or the result was seeded): a retry
  }
  if (key.phase > 0) {
    auto prev = entries_.find(PhaseKey{key.round, key.phase - 1});
    if (prev == entries_.end() || !prev->second.result) return ReplayRoundError(key.round, key.phase);
  }
  Entry& entry = entries_[key];
  if (entry.contributions.empty()) entry.contributions.resize(num_workers_);
  if (entry.contributions[worker].has_value()) {
    if (!(entry.contributions[worker]->spec == contribution.spec)) {
      return absl::InvalidArgumentError(absl::StrCat("worker ", worker, " resent round ", key.round, " phase ",
                                                     key.phase, " with a different phase spec"));
    }
    return absl::OkStatus();  // a retry: acknowledged, applied once
  }
  for (const auto& other : entry.contributions) {
    if (other.has_value() && !(other->spec == contribution.spec)) {
      return absl::InvalidArgumentError(absl::StrCat("worker ", worker, ": phase spec (", ReductionName(contribution.spec.reduction),
                                                     ") disagrees with other workers' (", ReductionName(other->spec.reduction), ")"));
    }
  }
  entry.contributions[worker] = std::move(contribution);
  if (++entry.received == num_workers_) {
    Complete(key, entry);
    for (auto& cb : entry.waiters) calls.emplace_back(std::move(cb), Outcome(entry));
    entry.waiters.clear();
  }
  if (key.round > newest_round_) Forget(newest_round_ = key.round, calls);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const PhaseResult>> PhaseTable::Outcome(const Entry& entry) {
  if (!entry.status.ok()) return entry.status;
  return entry.result;
}

void PhaseTable::Notify(Calls calls) {
  for (auto& [cb, outcome] : calls) cb(std::move(outcome));
}

void PhaseTable::Subscribe(const PhaseKey& key, ResultCallback done) {
  Calls calls;
  {
    absl::MutexLock lock(&mu_);
    if (auto st = CheckFresh(key); !st.ok()) {
      calls.emplace_back(std::move(done), st);
    } else if (Entry& entry = entries_[key]; entry.done) {
      calls.emplace_back(std::move(done), Outcome(entry));
    } else {
      entry.waiters.push_back(std::move(done));
    }
  }
  Notify(std::move(calls));
}

absl::StatusOr<std::shared_ptr<const PhaseResult>> PhaseTable::Reduce(const PhaseKey& key, const Entry& entry) {
  const PhaseResult* previous = nullptr;
  if (key.phase > 0) {
    auto it = entries_.find(PhaseKey{key.round, key.phase - 1});
    if (it == entries_.end() || !it->second.result) return ReplayRoundError(key.round, key.phase);
    previous = it->second.result.get();
  }
  std::vector<const Contribution*> in_order;
  for (const auto& c : entry.contributions) in_order.push_back(&*c);
  const PhaseSpec& spec = entry.contributions.front()->spec;
  SKETCHPS_ASSIGN_OR_RETURN(PhaseResult result, reduce_(spec, in_order, previous));
  if (spec.final_phase && on_final_) SKETCHPS_RETURN_IF_ERROR(on_final_(key, result));
  return std::make_shared<const PhaseResult>(std::move(result));
}

void PhaseTable::Complete(const PhaseKey& key, Entry& entry) {
  auto result = Reduce(key, entry);
  if (result.ok()) {
    entry.result = std::move(*result);
  } else {
    entry.status = absl::Status(result.status().code(), absl::StrCat("round ", key.round, " phase ", key.phase, ": ",
                                                                     result.status().message()));
  }
  entry.done = true;
  entry.contributions.clear();  // payloads are no longer needed; keep only the result
  entry.contributions.shrink_to_fit();
}

void PhaseTable::Forget(std::uint64_t newest_round, Calls& calls) {
  while (!entries_.empty() && newest_round >= kRetainRounds &&
         entries_.begin()->first.round < newest_round - kRetainRounds) {
    const PhaseKey& old = entries_.begin()->first;
    for (auto& cb : entries_.begin()->second.waiters) {
      calls.emplace_back(std::move(cb), absl::FailedPreconditionError(absl::StrCat(
                                            "round ", old.round, " phase ", old.phase, " was abandoned: the shard moved on")));
    }
    entries_.erase(entries_.begin());
  }
}

absl::StatusOr<std::shared_ptr<const PhaseResult>> PhaseTable::Await(const PhaseKey& key, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  if (auto st = CheckFresh(key); !st.ok()) return st;
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = entries_.find(key);
    return (it != entries_.end() && it->second.done) || !CheckFresh(key).ok();
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat("round ", key.round, " phase ", key.phase,
                                                    " did not complete before the deadline"));
  }
  if (auto st = CheckFresh(key); !st.ok()) return st;
  return Outcome(entries_.at(key));
}

void PhaseTable::Seed(const PhaseKey& key, std::shared_ptr<const PhaseResult> result) {
  Calls calls;
  {
    absl::MutexLock lock(&mu_);
    Entry& entry = entries_[key];
    entry.done = true;
    entry.status = absl::OkStatus();
    entry.result = std::move(result);
    entry.contributions.clear();
    for (auto& cb : entry.waiters) calls.emplace_back(std::move(cb), Outcome(entry));
    entry.waiters.clear();
    if (key.round > newest_round_) Forget(newest_round_ = key.round, calls);
  }
  Notify(std::move(calls));
}

bool PhaseTable::HasContribution(const PhaseKey& key, std::uint32_t worker) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  if (it->second.done) return true;
  return worker < it->second.contributions.size() && it->second.contributions[worker].has_value();
}

bool PhaseTable::HasAnyContribution(const PhaseKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  return it != entries_.end() && (it->second.done || it->second.received > 0);
}

std::size_t PhaseTable::HeldPhases() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace sketchps
