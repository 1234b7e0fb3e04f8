// ShardHost's part in elastic membership (ps/shard_host.h, job key ps.elastic): joins that wait for
// their first round, leaves before the end, the roster in checkpoints, and whom assembly waits for.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/reason.h"
#include "common/status.h"
#include "common/wire/layout_proto.h"
#include "ps/shard_host.h"
#include "spdlog/spdlog.h"

namespace sketchps::ps {

absl::StatusOr<std::vector<MemberSpan>> RosterFromProto(const v1::ShardCheckpoint& c, std::uint32_t workers) {
  std::vector<MemberSpan> roster;
  if (c.roster_size() == 0) return roster;
  if (static_cast<std::uint32_t>(c.roster_size()) != workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint.roster: ", c.roster_size(), " slots for a job of ", workers, " workers"));
  }
  for (const auto& m : c.roster()) {
    if (m.from() > m.until()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint.roster: a span from round ", m.from(), " until round ", m.until()));
    }
    roster.push_back(MemberSpan{m.from(), m.until()});
  }
  return roster;
}

void ShardHost::SetRoster(const PhaseTable& table, v1::ShardCheckpoint& c) {
  c.clear_roster();
  for (const MemberSpan& m : table.Roster()) {
    auto* span = c.add_roster();
    span->set_from(m.from);
    span->set_until(m.until);
  }
}

std::vector<std::uint32_t> ShardHost::AssemblyMembers() const {
  std::vector<std::uint32_t> members;
  const std::uint32_t workers = options_.job.workers;
  if (!options_.job.elastic) {
    for (std::uint32_t w = 0; w < workers; ++w) members.push_back(w);
    return members;
  }
  if (restored_ && !restored_->roster.empty()) {
    for (std::uint32_t w = 0; w < workers; ++w) {
      if (restored_->roster[w].Contains(restored_->rounds_applied)) members.push_back(w);
    }
    return members;
  }
  for (std::uint32_t w = 0; w < options_.job.elastic->initial_members; ++w) members.push_back(w);
  return members;
}

bool ShardHost::AssemblyComplete() const {
  const std::vector<std::uint32_t> members = AssemblyMembers();
  return !members.empty() &&
         std::all_of(members.begin(), members.end(),
                     [this](std::uint32_t w) ABSL_NO_THREAD_SAFETY_ANALYSIS { return joining_.contains(w); });
}

void ShardHost::ElasticJoin(const Offer& offer, std::uint64_t member_from, JoinReply reply) {
  std::vector<std::pair<JoinReply, absl::StatusOr<v1::JoinResponse>>> replies;
  {
    absl::MutexLock lock(&mu_);
    if (!options_.job.elastic) {
      replies.emplace_back(std::move(reply), absl::FailedPreconditionError(
                                                 "elastic_join: this job's membership is fixed "
                                                 "(ps.elastic: false): start the worker as one of its workers"));
    } else if (!shard_) {
      // Joiners join a serving shard; assembly waits for the members it restores only.
      replies.emplace_back(std::move(reply),
                           absl::UnavailableError(absl::StrCat("shard ", options_.shard_id,
                                                               " is assembling its state; ", AssemblyStatusLocked())));
    } else if (!SameLayers(offer.layers, layers_)) {
      replies.emplace_back(std::move(reply),
                           absl::InvalidArgumentError("layers: differ from the job's layer table (another model?)"));
    } else if (auto start = shard_->table().Join(offer.worker, member_from); !start.ok()) {
      replies.emplace_back(std::move(reply), start.status());
    } else {
      absl::MutexLock joins(&joins_mu_);
      if (auto old = elastic_waiting_.find(offer.worker); old != elastic_waiting_.end()) {
        replies.emplace_back(
            std::move(old->second.reply),
            WithReason(absl::AbortedError("superseded by a newer Join of this worker"), Reason::kSuperseded));
        elastic_waiting_.erase(old);
      }
      spdlog::info("shard {}: worker {} joins at round {} (asked for {}; {} rounds applied)", options_.shard_id,
                   offer.worker, *start, member_from, shard_->rounds_applied());
      SubmitCheckpoint(*shard_);  // the roster with the joiner, so that a restart still waits for it
      if (shard_->rounds_applied() == *start) {
        v1::JoinResponse response = StateResponse(*shard_);
        response.set_member_from(*start);
        replies.emplace_back(std::move(reply), std::move(response));
      } else {
        elastic_waiting_[offer.worker] = WaitingJoin{*start, std::move(reply)};
      }
    }
  }
  for (auto& [r, response] : replies) r(std::move(response));
}

void ShardHost::AnswerElasticJoins(std::uint64_t rounds_applied) {
  if (!options_.job.elastic) return;
  std::shared_ptr<Shard> shard = this->shard();
  if (!shard) return;
  std::vector<JoinReply> ready;
  {
    absl::MutexLock joins(&joins_mu_);
    for (auto it = elastic_waiting_.begin(); it != elastic_waiting_.end();) {
      if (it->second.from != rounds_applied) {
        ++it;
        continue;
      }
      ready.push_back(std::move(it->second.reply));
      it = elastic_waiting_.erase(it);
    }
  }
  if (ready.empty()) return;
  v1::JoinResponse response = StateResponse(*shard);
  response.set_member_from(rounds_applied);
  for (auto& reply : ready) reply(response);
}

absl::Status ShardHost::ElasticLeave(Shard& shard, const v1::LeaveRequest& request) {
  SKETCHPS_RETURN_IF_ERROR(shard.table().Leave(request.worker_id(), request.rounds_applied()));
  spdlog::info("shard {}: worker {} left the job before round {} (members left: {})", options_.shard_id,
               request.worker_id(), request.rounds_applied(), shard.table().ActiveMembers());
  return absl::OkStatus();
}

}  // namespace sketchps::ps
