// PhaseTable's membership and round deadline (engine/phase_table.h "Elastic membership", "Round
// deadline"): workers that join a running job from a round on and leave before its end, the roster a
// checkpoint keeps, and the phases closed at their deadline without the workers still missing (who are
// then excluded from that round). Admission, results and subscriptions: engine/phase_table.cc.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/reason.h"
#include "common/status.h"
#include "engine/phase_table.h"

namespace sketchps {

absl::StatusOr<std::uint64_t> PhaseTable::Join(std::uint32_t worker, std::uint64_t from) {
  if (!options_.elastic) return absl::FailedPreconditionError("Join: this job's membership is fixed (ps.elastic)");
  SKETCHPS_RETURN_IF_ERROR(CheckWorker(worker));
  std::vector<Work> ready;
  std::uint64_t start = 0;
  {
    absl::MutexLock lock(&mu_);
    MemberSpan& span = roster_[worker];
    if (span.until != MemberSpan::kNever) {
      return absl::FailedPreconditionError(
          absl::StrCat("worker ", worker, " left before round ", span.until, " and cannot join again"));
    }
    if (Contributed(worker, 0)) {
      return absl::FailedPreconditionError(
          absl::StrCat("worker ", worker, " is taking part in an open round: it cannot join again now"));
    }
    start = std::max(from, applied_);
    auto closed = [&](std::uint64_t round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (auto it = entries_.lower_bound(PhaseKey{round, 0}); it != entries_.end() && it->first.round == round; ++it) {
        if (!it->second.auxiliary && (it->second.done || it->second.reducing)) return true;
      }
      return false;
    };
    while (closed(start)) ++start;
    span.from = start;
    ready = TakeComplete();  // a later start than before: rounds that waited for it may be complete
  }
  for (auto& work : ready) Dispatch(std::move(work));
  return start;
}

absl::Status PhaseTable::Leave(std::uint32_t worker, std::uint64_t until) {
  if (!options_.elastic) return absl::FailedPreconditionError("Leave: this job's membership is fixed (ps.elastic)");
  SKETCHPS_RETURN_IF_ERROR(CheckWorker(worker));
  std::vector<Work> ready;
  {
    absl::MutexLock lock(&mu_);
    MemberSpan& span = roster_[worker];
    if (span.until != MemberSpan::kNever) return absl::OkStatus();  // already left
    if (span.from == MemberSpan::kNever) {
      return absl::FailedPreconditionError(absl::StrCat("worker ", worker, " is not a member: it cannot leave"));
    }
    if (Contributed(worker, until)) {
      return absl::FailedPreconditionError(
          absl::StrCat("worker ", worker, " has already pushed a phase of round ", until, " or later"));
    }
    span.until = std::max(until, span.from);
    ready = TakeComplete();
  }
  for (auto& work : ready) Dispatch(std::move(work));
  return absl::OkStatus();
}

bool PhaseTable::IsMember(std::uint64_t round, std::uint32_t worker) const {
  absl::MutexLock lock(&mu_);
  return IsMemberLocked(round, worker);
}

std::vector<MemberSpan> PhaseTable::Roster() const {
  absl::MutexLock lock(&mu_);
  return roster_;
}

absl::Status PhaseTable::SetRoster(std::vector<MemberSpan> roster) {
  if (!options_.elastic) return absl::OkStatus();
  if (roster.size() != options_.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("roster: ", roster.size(), " slots for a table of ", options_.num_workers, " workers"));
  }
  absl::MutexLock lock(&mu_);
  roster_ = std::move(roster);
  return absl::OkStatus();
}

std::uint32_t PhaseTable::ActiveMembers() const {
  absl::MutexLock lock(&mu_);
  return static_cast<std::uint32_t>(std::count_if(roster_.begin(), roster_.end(), [](const MemberSpan& m) {
    return m.from != MemberSpan::kNever && m.until == MemberSpan::kNever;
  }));
}

std::vector<PhaseTable::Closed> PhaseTable::CloseExpired(absl::Time now) {
  std::vector<Closed> report;
  if (options_.deadline <= absl::ZeroDuration()) return report;
  std::vector<Work> closed;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, entry] : entries_) {
      if (entry.done || entry.reducing || entry.received == 0) continue;
      if (now - entry.opened < options_.deadline) continue;
      if (entry.auxiliary) {
        if (!WaitsOnlyForLeftOut(key, entry)) continue;
        Closed c{key, {}, true};
        for (std::uint32_t w = 0; w < options_.num_workers; ++w) {
          if (!entry.contributions[w].has_value() && IsMemberLocked(key.round, w)) c.left_out.push_back(w);
        }
        report.push_back(std::move(c));
        closed.push_back(Take(key, entry));
        continue;
      }
      // At least half of the workers still expected: a deadline must not close a round that
      // everyone is late for (a slow network, a pause of the shard) on its first arrival.
      if (2 * entry.received < Expected(key.round)) continue;
      std::vector<bool>& out = out_[key.round];
      out.resize(options_.num_workers, false);
      Closed c{key, {}};
      for (std::uint32_t w = 0; w < options_.num_workers; ++w) {
        if (!entry.contributions[w].has_value() && !out[w] && IsMemberLocked(key.round, w)) {
          out[w] = true;
          c.left_out.push_back(w);
        }
      }
      report.push_back(std::move(c));
      closed.push_back(Take(key, entry));
    }
  }
  for (auto& work : closed) Dispatch(std::move(work));
  return report;
}

bool PhaseTable::WaitsOnlyForLeftOut(const PhaseKey& key, const Entry& entry) const {
  if (2 * entry.received < Members(key.round)) return false;  // as for scheme phases: at least half
  for (std::uint32_t w = 0; w < options_.num_workers; ++w) {
    if (!entry.contributions[w].has_value() && IsMemberLocked(key.round, w) && !IsOut(key.round, w)) return false;
  }
  return true;
}

bool PhaseTable::Excluded(std::uint64_t round, std::uint32_t worker) const {
  absl::MutexLock lock(&mu_);
  return IsOut(round, worker);
}

}  // namespace sketchps
