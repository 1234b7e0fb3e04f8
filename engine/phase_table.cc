// PhaseTable (engine/phase_table.h): admission of contributions, reduction and publication of phase
// results, subscriptions and the results kept for recent rounds. Membership and the round deadline:
// engine/phase_table_membership.cc.
#include "engine/phase_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/reason.h"
#include "common/status.h"

namespace sketchps {

absl::Status ReplayRoundError(std::uint64_t round, std::uint32_t phase) {
  return WithReason(absl::FailedPreconditionError(absl::StrCat("round ", round, " phase ", phase,
                                                               ": this shard holds no result of the previous phase; "
                                                               "replay the round from phase 0")),
                    Reason::kReplayRound);
}

PhaseTable::PhaseTable(PhaseTableOptions options) : options_(std::move(options)) {
  applied_ = options_.first_round.value_or(0);
  roster_.assign(options_.num_workers, MemberSpan{0, MemberSpan::kNever});
  if (options_.elastic) {
    for (std::uint32_t w = options_.elastic->initial_members; w < options_.num_workers; ++w) roster_[w] = MemberSpan{};
  }
}

PhaseTable::PhaseTable(std::uint32_t num_workers, ReduceFn reduce, FinalFn on_final)
    : PhaseTable(PhaseTableOptions{num_workers, std::move(reduce), std::move(on_final), nullptr, nullptr, std::nullopt,
                                   absl::ZeroDuration(), std::nullopt}) {}

absl::Status PhaseTable::CheckFresh(const PhaseKey& key) const {
  if (newest_round_ >= kRetainRounds && key.round < newest_round_ - kRetainRounds) {
    return WithReason(absl::FailedPreconditionError(
                          absl::StrCat("round ", key.round, " is stale: the shard is at round ", newest_round_)),
                      Reason::kStaleRound);
  }
  return absl::OkStatus();
}

absl::Status PhaseTable::CheckOrder(const PhaseKey& key, bool auxiliary) const {
  if (!options_.first_round) return absl::OkStatus();
  // An auxiliary phase applies nothing: it may belong to the last applied round.
  if (auxiliary && key.round + 1 == applied_) return absl::OkStatus();
  if (key.round < applied_) {
    return WithReason(
        absl::FailedPreconditionError(absl::StrCat("round ", key.round, " was already applied (", applied_,
                                                   " rounds applied): phase ", key.phase, " cannot be opened")),
        Reason::kRoundApplied);
  }
  if (key.round > applied_) {
    return WithReason(absl::FailedPreconditionError(absl::StrCat(
                          "round ", key.round, " is ahead of this shard, which holds ", applied_, " rounds")),
                      Reason::kRoundAhead);
  }
  return absl::OkStatus();
}

const PhaseResult* PhaseTable::PreviousResult(const PhaseKey& key) const {
  if (key.phase == 0) return nullptr;
  auto prev = entries_.find(PhaseKey{key.round, key.phase - 1});
  return prev == entries_.end() || !prev->second.result ? nullptr : prev->second.result.get();
}

absl::Status PhaseTable::Admit(const PhaseKey& key, const Entry& entry, const Contribution& contribution) const {
  for (std::size_t w = 0; w < entry.contributions.size(); ++w) {
    const auto& other = entry.contributions[w];
    if (other.has_value() && !(other->spec == contribution.spec)) {
      return absl::InvalidArgumentError(absl::StrCat("spec: phase spec (", ReductionName(contribution.spec.reduction),
                                                     ") disagrees with worker ", w, "'s (",
                                                     ReductionName(other->spec.reduction), ")"));
    }
  }
  if (!options_.admit || !contribution.payload) return absl::OkStatus();
  const PayloadValue* first = nullptr;
  for (const auto& other : entry.contributions) {
    if (other.has_value() && other->payload) {
      first = &*other->payload;
      break;
    }
  }
  return options_.admit(contribution.spec, *contribution.payload, PreviousResult(key), first);
}

absl::Status PhaseTable::CheckWorker(std::uint32_t worker) const {
  if (worker < options_.num_workers) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("worker_id ", worker, " is not in [0, ", options_.num_workers, ")"));
}

absl::Status PhaseTable::Submit(const PhaseKey& key, std::uint32_t worker, Contribution contribution) {
  SKETCHPS_RETURN_IF_ERROR(CheckWorker(worker));
  std::optional<Work> work;
  Calls dropped;  // waiters of rounds that fell out of the retention window
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    auto stored = Store(key, worker, std::move(contribution), dropped);
    if (stored.ok()) work = *std::move(stored);
    status = stored.status();
  }
  Notify(std::move(dropped));
  if (work) Dispatch(*std::move(work));
  return status;
}

absl::StatusOr<std::optional<PhaseTable::Work>> PhaseTable::Store(const PhaseKey& key, std::uint32_t worker,
                                                                  Contribution contribution, Calls& dropped) {
  SKETCHPS_RETURN_IF_ERROR(CheckFresh(key));
  auto it = entries_.find(key);
  if (it != entries_.end() && (it->second.done || it->second.reducing)) {
    return std::nullopt;  // every worker has contributed (or the result was seeded): a retry
  }
  // Left out of this round by its deadline: acknowledged; the caller awaits the result, which says so.
  if (!contribution.spec.auxiliary && IsOut(key.round, worker)) return std::nullopt;
  if (!IsMemberLocked(key.round, worker)) {
    return WithReason(absl::FailedPreconditionError(absl::StrCat("worker ", worker, " is not a member of round ",
                                                                 key.round, " (it has not joined, or it left)")),
                      Reason::kNotMember);
  }
  SKETCHPS_RETURN_IF_ERROR(CheckOrder(key, contribution.spec.auxiliary));
  if (key.phase > 0 && !contribution.spec.auxiliary && PreviousResult(key) == nullptr) {
    return ReplayRoundError(key.round, key.phase);
  }
  static const Entry kEmpty;
  const Entry& held = it == entries_.end() ? kEmpty : it->second;
  if (worker < held.contributions.size() && held.contributions[worker].has_value()) {
    if (!(held.contributions[worker]->spec == contribution.spec)) {
      return absl::InvalidArgumentError(absl::StrCat("worker ", worker, " resent round ", key.round, " phase ",
                                                     key.phase, " with a different phase spec"));
    }
    return std::nullopt;  // a retry: acknowledged, applied once
  }
  if (auto st = Admit(key, held, contribution); !st.ok()) {
    return absl::Status(
        st.code(), absl::StrCat("worker ", worker, " round ", key.round, " phase ", key.phase, ": ", st.message()));
  }
  Entry& entry = entries_[key];
  if (entry.contributions.empty()) entry.contributions.resize(options_.num_workers);
  if (entry.received == 0) {
    entry.opened = absl::Now();
    entry.auxiliary = contribution.spec.auxiliary;
  }
  entry.contributions[worker] = std::move(contribution);
  if (key.round > newest_round_) Forget(newest_round_ = key.round, dropped);
  if (++entry.received < Needed(key, entry)) return std::nullopt;
  return std::optional<Work>(Take(key, entry));
}

PhaseTable::Work PhaseTable::Take(const PhaseKey& key, Entry& entry) {
  entry.reducing = true;
  Work work{key, {}, nullptr, {}};
  const PhaseSpec* spec = nullptr;
  for (const auto& c : entry.contributions) {
    if (c.has_value()) spec = &c->spec;
  }
  for (auto& c : entry.contributions) work.contributions.push_back(c ? *std::move(c) : Contribution{*spec, {}, {}});
  entry.contributions.clear();
  entry.contributions.shrink_to_fit();
  if (key.phase > 0 && !entry.auxiliary) {
    work.previous = entries_.at(PhaseKey{key.round, key.phase - 1}).result;  // checked in Store: it exists
  }
  if (auto out = out_.find(key.round); out != out_.end()) {
    for (std::uint32_t w = 0; w < out->second.size(); ++w) {
      // An auxiliary phase lists only the left-out workers it was closed without.
      if (out->second[w] && (!entry.auxiliary || !work.contributions[w].payload.has_value()))
        work.excluded.push_back(w);
    }
  }
  for (std::uint32_t w = 0; w < options_.num_workers; ++w) {
    if (!IsMemberLocked(key.round, w)) work.absent.push_back(w);
  }
  return work;
}

bool PhaseTable::IsOut(std::uint64_t round, std::uint32_t worker) const {
  auto it = out_.find(round);
  return it != out_.end() && worker < it->second.size() && it->second[worker];
}

bool PhaseTable::IsMemberLocked(std::uint64_t round, std::uint32_t worker) const {
  return worker < roster_.size() && roster_[worker].Contains(round);
}

std::uint32_t PhaseTable::Members(std::uint64_t round) const {
  return static_cast<std::uint32_t>(
      std::count_if(roster_.begin(), roster_.end(), [round](const MemberSpan& m) { return m.Contains(round); }));
}

std::uint32_t PhaseTable::Expected(std::uint64_t round) const {
  auto it = out_.find(round);
  std::uint32_t expected = Members(round);
  if (it == out_.end()) return expected;
  for (std::uint32_t w = 0; w < it->second.size(); ++w) {
    if (it->second[w] && IsMemberLocked(round, w)) --expected;
  }
  return expected;
}

std::uint32_t PhaseTable::Needed(const PhaseKey& key, const Entry& entry) const {
  return entry.auxiliary ? Members(key.round) : Expected(key.round);
}

std::vector<PhaseTable::Work> PhaseTable::TakeComplete() {
  std::vector<Work> ready;
  for (auto& [key, entry] : entries_) {
    if (entry.done || entry.reducing || entry.received == 0) continue;
    if (entry.received >= Needed(key, entry)) ready.push_back(Take(key, entry));
  }
  return ready;
}

bool PhaseTable::Contributed(std::uint32_t worker, std::uint64_t round) const {
  for (auto it = entries_.lower_bound(PhaseKey{round, 0}); it != entries_.end(); ++it) {
    const Entry& e = it->second;
    if (!e.auxiliary && !e.done && !e.reducing && worker < e.contributions.size() &&
        e.contributions[worker].has_value()) {
      return true;
    }
  }
  return false;
}

void PhaseTable::Dispatch(Work work) {
  if (options_.strand == nullptr) return Finish(std::move(work));
  auto shared = std::make_shared<Work>(std::move(work));
  options_.strand->Post([this, shared] { Finish(std::move(*shared)); });
}

void PhaseTable::Finish(Work work) {
  std::vector<const Contribution*> in_order;
  for (const auto& c : work.contributions) in_order.push_back(&c);
  const PhaseSpec spec = work.contributions.front().spec;
  absl::StatusOr<PhaseResult> reduced = options_.reduce(spec, in_order, work.previous.get());
  work.contributions.clear();  // payloads are no longer needed
  absl::StatusOr<std::shared_ptr<const PhaseResult>> result = absl::UnknownError("not reduced");
  if (reduced.ok()) {
    reduced->excluded = work.excluded;
    reduced->absent = work.absent;
  }
  if (!reduced.ok()) {
    result = reduced.status();
  } else if (spec.final_phase && options_.on_final) {
    result = options_.on_final(work.key, *std::move(reduced));
  } else {
    result = std::make_shared<const PhaseResult>(*std::move(reduced));
  }
  if (!result.ok()) {
    result = Annotate(result.status(), absl::StrCat("round ", work.key.round, " phase ", work.key.phase));
  } else if ((*result)->excluded != work.excluded || (*result)->absent != work.absent) {
    auto copy = std::make_shared<PhaseResult>(**result);  // the final hook published a result of its own
    copy->excluded = work.excluded;
    copy->absent = work.absent;
    result = std::shared_ptr<const PhaseResult>(std::move(copy));
  }
  Publish(work.key, std::move(result), spec.final_phase);
}

void PhaseTable::Publish(const PhaseKey& key, absl::StatusOr<std::shared_ptr<const PhaseResult>> outcome,
                         bool final_phase) {
  Calls calls;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return;  // forgotten meanwhile: nobody can wait for it
    Entry& entry = it->second;
    entry.done = true;
    entry.reducing = false;
    if (outcome.ok()) {
      entry.result = *std::move(outcome);
      if (final_phase && options_.first_round && key.round >= applied_) applied_ = key.round + 1;
    } else {
      entry.status = outcome.status();
    }
    for (auto& cb : entry.waiters) calls.emplace_back(std::move(cb), Outcome(entry));
    entry.waiters.clear();
  }
  Notify(std::move(calls));
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

void PhaseTable::Forget(std::uint64_t newest_round, Calls& calls) {
  while (!entries_.empty() && newest_round >= kRetainRounds &&
         entries_.begin()->first.round < newest_round - kRetainRounds) {
    const PhaseKey& old = entries_.begin()->first;
    for (auto& cb : entries_.begin()->second.waiters) {
      calls.emplace_back(std::move(cb),
                         absl::FailedPreconditionError(absl::StrCat("round ", old.round, " phase ", old.phase,
                                                                    " was abandoned: the shard moved on")));
    }
    entries_.erase(entries_.begin());
  }
  while (!out_.empty() && newest_round >= kRetainRounds && out_.begin()->first < newest_round - kRetainRounds) {
    out_.erase(out_.begin());
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
    return absl::DeadlineExceededError(
        absl::StrCat("round ", key.round, " phase ", key.phase, " did not complete before the deadline"));
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
    entry.reducing = false;
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
  if (it->second.done || it->second.reducing) return true;
  return worker < it->second.contributions.size() && it->second.contributions[worker].has_value();
}

bool PhaseTable::HasAnyContribution(const PhaseKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  return it != entries_.end() && (it->second.done || it->second.reducing || it->second.received > 0);
}

std::size_t PhaseTable::HeldPhases() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

std::uint64_t PhaseTable::rounds_applied() const {
  absl::MutexLock lock(&mu_);
  return applied_;
}

}  // namespace sketchps
