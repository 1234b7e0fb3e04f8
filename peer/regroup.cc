#include "peer/regroup.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/net/grpc_edge.h"
#include "common/reason.h"
#include "common/status.h"

namespace sketchps::peer {
namespace {

constexpr absl::Duration kPoll = absl::Milliseconds(100);   // how often a coordinator re-checks
constexpr absl::Duration kAnswerMargin = absl::Seconds(5);  // beyond the window, for the answer to arrive
constexpr int kMaxMessageBytes = 1 << 20;

}  // namespace

std::optional<std::uint32_t> RegroupPlan::RankOf(std::uint32_t old_rank) const {
  const auto it = std::lower_bound(members.begin(), members.end(), old_rank);
  if (it == members.end() || *it != old_rank) return std::nullopt;
  return static_cast<std::uint32_t>(it - members.begin());
}

absl::Status Regrouper::Arm(RegroupConfig config) {
  if (config.rank >= config.peers.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("regroup: rank ", config.rank, " is not in [0, ", config.peers.size(), ")"));
  }
  if (!config.identities.empty() && config.identities.size() != config.peers.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("regroup: ", config.identities.size(), " identities for ", config.peers.size(), " ranks"));
  }
  SKETCHPS_ASSIGN_OR_RETURN(auto credentials, MakeChannelCredentials(config.tls));
  std::vector<std::shared_ptr<v1::Peer::Stub>> stubs;
  for (std::uint32_t r = 0; r < config.peers.size(); ++r) {
    const std::uint32_t id = config.identities.empty() ? r : config.identities[r];
    const std::string name = config.tls.insecure ? "" : Identity{Identity::Role::kWorker, id}.Name();
    stubs.push_back(r == config.rank ? nullptr
                                     : std::shared_ptr<v1::Peer::Stub>(v1::Peer::NewStub(
                                           MakeClientChannel(config.peers[r], kMaxMessageBytes, credentials, name))));
  }
  absl::MutexLock lock(&mu_);
  config_ = std::move(config);
  stubs_ = std::move(stubs);
  armed_ = true;
  return absl::OkStatus();
}

std::uint64_t Regrouper::epoch() const {
  absl::MutexLock lock(&mu_);
  return config_.epoch;
}

absl::Status Regrouper::Check(const v1::RegroupRequest& r) const {
  if (!armed_) return absl::FailedPreconditionError("regroup: this worker has not joined the job yet");
  if (r.job_id() != config_.job_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("job_id: '", r.job_id(), "' is not this job ('", config_.job_id, "')"));
  }
  const auto old = collections_.find(r.epoch());
  if (r.epoch() != config_.epoch && (old == collections_.end() || !old->second.decision)) {
    return absl::FailedPreconditionError(
        absl::StrCat("epoch: a regroup of epoch ", r.epoch(), " but this worker is in epoch ", config_.epoch));
  }
  if (r.epoch() == config_.epoch && r.rank() >= config_.peers.size()) {
    return absl::InvalidArgumentError(absl::StrCat("rank: ", r.rank(), " is not in [0, ", config_.peers.size(), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RegroupPlan> Regrouper::Handle(const v1::RegroupRequest& request,
                                              const std::optional<Identity>& caller) {
  const std::uint64_t epoch = request.epoch();
  {
    absl::MutexLock lock(&mu_);
    SKETCHPS_RETURN_IF_ERROR(Check(request));
    if (caller) {
      const std::uint32_t id = config_.identities.empty() ? request.rank() : config_.identities[request.rank()];
      SKETCHPS_RETURN_IF_ERROR(CheckWorker(caller, id, "rank"));
    }
    Collection& c = collections_[epoch];
    for (std::uint32_t r : request.evict()) {
      if (r < config_.peers.size()) c.evicted.insert(r);
    }
    if (c.decision || c.evicted.contains(request.rank())) return AnswerFor(c, epoch, request.rank());
    c.asked[request.rank()] = request.next_round();
    if (c.started) {
      const auto decided = [&c]() { return c.decision.has_value(); };
      if (!mu_.AwaitWithTimeout(absl::Condition(&decided), config_.window + kProbeTimeout + kAnswerMargin)) {
        return absl::DeadlineExceededError("regroup: the coordinator did not decide in time");
      }
      return AnswerFor(c, epoch, request.rank());
    }
    c.started = true;
  }
  Collect(epoch);
  absl::MutexLock lock(&mu_);
  const Collection& c = collections_[epoch];
  if (!c.decision) return absl::AbortedError("regroup: this worker left the epoch while collecting");
  return AnswerFor(c, epoch, request.rank());
}

void Regrouper::Collect(std::uint64_t epoch) {
  absl::Time deadline;
  std::uint32_t self = 0;
  {
    absl::MutexLock lock(&mu_);
    deadline = absl::Now() + config_.window;
    self = config_.rank;
  }
  for (;;) {
    std::vector<std::uint32_t> missing;
    {
      absl::MutexLock lock(&mu_);
      if (config_.epoch != epoch) return;  // re-armed meanwhile
      Collection& c = collections_[epoch];
      for (std::uint32_t r = 0; r < config_.peers.size(); ++r) {
        if (!c.asked.contains(r) && !c.dead.contains(r) && !c.evicted.contains(r)) missing.push_back(r);
      }
      if (missing.empty() || absl::Now() >= deadline) {
        c.decision = DecideRegroup(config_.epoch, config_.peers.size(), c.asked, c.evicted);
        return;
      }
    }
    for (std::uint32_t r : missing) {
      if (r != self && !Probe(r)) {
        absl::MutexLock lock(&mu_);
        collections_[epoch].dead.insert(r);
      }
    }
    absl::MutexLock lock(&mu_);
    const Collection& c = collections_[epoch];
    const std::size_t known = c.asked.size() + c.dead.size();
    const auto changed = [&c, known]() { return c.asked.size() + c.dead.size() != known; };
    mu_.AwaitWithTimeout(absl::Condition(&changed), kPoll);
  }
}

absl::StatusOr<RegroupPlan> DecideRegroup(std::uint64_t failed_epoch, std::size_t num_ranks,
                                          const std::map<std::uint32_t, std::uint64_t>& asked,
                                          const std::set<std::uint32_t>& evicted) {
  RegroupPlan plan;
  plan.epoch = failed_epoch + 1;
  std::uint64_t lo = ~0ull, hi = 0;
  for (const auto& [rank, next] : asked) {
    if (evicted.contains(rank)) continue;
    plan.members.push_back(rank);
    lo = std::min(lo, next);
    hi = std::max(hi, next);
  }
  const std::string who = absl::StrCat("ranks [", absl::StrJoin(plan.members, ", "), "] of the ", num_ranks,
                                       " workers of epoch ", failed_epoch, " asked to go on");
  if (2 * plan.members.size() <= num_ranks) {
    return absl::FailedPreconditionError(absl::StrCat("regroup: only ", who, "; going on needs a strict majority"));
  }
  if (hi > lo + 1) {
    return absl::FailedPreconditionError(absl::StrCat("regroup: ", who, " but their next rounds span ", lo, "..", hi));
  }
  plan.round = lo;
  return plan;
}

absl::StatusOr<RegroupPlan> PlanFromResponse(const v1::RegroupResponse& response, const v1::RegroupRequest& request,
                                             std::size_t num_ranks) {
  const auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("regroup answer: ", what));
  };
  if (response.epoch() != request.epoch() + 1) {
    return bad(absl::StrCat("epoch: ", response.epoch(), " is not the failed epoch ", request.epoch(), " + 1"));
  }
  RegroupPlan plan{response.epoch(), {response.members().begin(), response.members().end()}, response.round()};
  for (std::size_t i = 0; i < plan.members.size(); ++i) {
    if (plan.members[i] >= num_ranks)
      return bad(absl::StrCat("members[", i, "]: ", plan.members[i], " >= ", num_ranks, " ranks"));
    if (i > 0 && plan.members[i] <= plan.members[i - 1]) return bad(absl::StrCat("members[", i, "]: not ascending"));
  }
  if (2 * plan.members.size() <= num_ranks) {
    return bad(absl::StrCat("members: ", plan.members.size(), " of ", num_ranks, " ranks are not a strict majority"));
  }
  if (!plan.RankOf(request.rank()))
    return bad(absl::StrCat("members: rank ", request.rank(), " (the asker) is missing"));
  // The decided round is the members' lowest next_round, at most one below the asker's.
  if (plan.round > request.next_round() || plan.round + 1 < request.next_round()) {
    return bad(absl::StrCat("round: ", plan.round, " is not the asker's next round ", request.next_round(),
                            " or the one before"));
  }
  return plan;
}

absl::StatusOr<RegroupPlan> Regrouper::AnswerFor(const Collection& c, std::uint64_t epoch, std::uint32_t rank) {
  if (c.evicted.contains(rank)) {
    return WithReason(absl::FailedPreconditionError(absl::StrCat("regroup: rank ", rank, " of epoch ", epoch,
                                                                 " is evicted: a peer refused its letter")),
                      Reason::kEvicted);
  }
  if (!c.decision->ok()) return c.decision->status();
  const RegroupPlan& plan = **c.decision;
  if (!plan.RankOf(rank)) {
    return absl::FailedPreconditionError(absl::StrCat("regroup: rank ", rank, " of epoch ", epoch,
                                                      " was left out: it asked after the survivors [",
                                                      absl::StrJoin(plan.members, ", "), "] had decided"));
  }
  return plan;
}

bool Regrouper::Probe(std::uint32_t rank) {
  std::shared_ptr<v1::Peer::Stub> stub;
  v1::ProbeRequest request;
  {
    absl::MutexLock lock(&mu_);
    stub = stubs_.at(rank);
    request.set_job_id(config_.job_id);
  }
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + kProbeTimeout));
  v1::ProbeResponse response;
  return stub->Probe(&ctx, request, &response).ok();
}

absl::StatusOr<RegroupPlan> Regrouper::Ask(std::uint64_t next_round, const std::set<std::uint32_t>& evict) {
  v1::RegroupRequest request;
  std::size_t n = 0;
  absl::Duration window;
  {
    absl::MutexLock lock(&mu_);
    if (!armed_) return absl::FailedPreconditionError("regroup: not armed");
    request.set_job_id(config_.job_id);
    request.set_epoch(config_.epoch);
    request.set_rank(config_.rank);
    n = config_.peers.size();
    window = config_.window;
  }
  request.set_next_round(next_round);
  for (std::uint32_t r : evict) request.add_evict(r);
  std::vector<std::string> skipped;
  for (std::uint32_t c = 0; c < n; ++c) {
    if (evict.contains(c)) continue;  // not a coordinator to trust
    if (c == request.rank()) return Handle(request);
    if (!Probe(c)) {
      skipped.push_back(absl::StrCat(c));
      continue;
    }
    std::shared_ptr<v1::Peer::Stub> stub;
    {
      absl::MutexLock lock(&mu_);
      stub = stubs_.at(c);
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + window + 2 * kProbeTimeout + kAnswerMargin));
    v1::RegroupResponse response;
    const grpc::Status s = stub->Regroup(&ctx, request, &response);
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      skipped.push_back(absl::StrCat(c));
      continue;
    }
    if (!s.ok()) return FromGrpcStatus(s);
    auto plan = PlanFromResponse(response, request, n);
    if (!plan.ok()) return Annotate(plan.status(), absl::StrCat("coordinator rank ", c));
    return plan;
  }
  return absl::InternalError("regroup: unreachable");
}

}  // namespace sketchps::peer
