#include "ps/transport.h"

#include <algorithm>
#include <future>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/reason.h"
#include "common/status.h"
#include "common/wire/codec.h"
#include "kernels/vector_ops.h"
#include "spdlog/spdlog.h"

namespace sketchps::ps {
namespace {

constexpr absl::Duration kReportTimeout = absl::Seconds(2);  // per shard, for ReportFailure

constexpr absl::Duration kJoinPoll = absl::Milliseconds(200);  // a joiner waiting for its round
constexpr int kMaxJoinPasses = 50;

class PsTransport final : public Transport {
 public:
  PsTransport(std::unique_ptr<Client> client, std::optional<std::uint64_t> join_at)
      : client_(std::move(client)), join_at_(join_at) {}

  // Joins every shard at once (a starting shard answers when every worker has joined), offering
  // this fresh replica, and takes each shard's state: a fresh worker adopts whatever round the job
  // is at. Later rejoins (a restarted shard) offer the replica as it stands (OfferFn).
  absl::StatusOr<std::uint64_t> Start(const LayerTable& layers, const ShardMap& shards, float* params,
                                      Replica& replica) override {
    client_->SetReplica(layers, [params, shards, &replica](std::uint32_t shard) {
      const auto& r = shards.ranges[shard];
      return ReplicaOffer{kernels::CopyOut(params + r.lo, r.size()), replica.optimizer(shard).State()};
    });
    if (join_at_) return JoinRunning(*join_at_, shards, params, replica);
    auto joins = JoinEvery(shards, params, std::nullopt);
    std::uint64_t lo = ~0ull, hi = 0;
    for (std::uint32_t shard = 0; shard < shards.ranges.size(); ++shard) {
      SKETCHPS_ASSIGN_OR_RETURN(auto joined, joins[shard].get());
      SKETCHPS_RETURN_IF_ERROR(Adopt(shard, shards.ranges[shard], joined, params, replica));
      lo = std::min<std::uint64_t>(lo, joined.rounds_applied());
      hi = std::max<std::uint64_t>(hi, joined.rounds_applied());
    }
    if (hi > lo + 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("shards disagree on the round: they have applied between ", lo, " and ", hi, " rounds"));
    }
    ahead_ = hi != lo;
    return shards.ranges.empty() ? 0 : lo;
  }

  bool shards_ahead() const override { return ahead_; }

  // Joins every shard at once, offering `params` as a fresh replica (with `member_from`: an elastic
  // join, ps/client.h); one future per shard.
  std::vector<std::future<absl::StatusOr<v1::JoinResponse>>> JoinEvery(const ShardMap& shards, const float* params,
                                                                       std::optional<std::uint64_t> member_from) {
    std::vector<std::future<absl::StatusOr<v1::JoinResponse>>> joins;
    for (std::uint32_t shard = 0; shard < shards.ranges.size(); ++shard) {
      const auto& r = shards.ranges[shard];
      joins.push_back(
          std::async(std::launch::async,
                     [this, shard, member_from, offer = ReplicaOffer{kernels::CopyOut(params + r.lo, r.size()), {}}] {
                       return client_->Join(shard, 0, offer, member_from);
                     }));
    }
    return joins;
  }

  std::vector<std::uint32_t> round_absent() const override {
    return client_->num_shards() == 0 ? std::vector<std::uint32_t>{} : client_->last_final(0).absent;
  }

  // Elastic membership: waits until every shard has applied the rounds before `want`, then joins every
  // shard as a member from one round R >= want on which they all agree (a shard that has already
  // closed a phase of R answers a later round; the worker then asks every shard for that one, which
  // also frees the shards that held R for it). Each answer comes once its shard has applied R rounds,
  // with the state this worker's first round starts from.
  absl::StatusOr<std::uint64_t> JoinRunning(std::uint64_t want, const ShardMap& shards, float* params,
                                            Replica& replica) {
    const std::uint32_t n = static_cast<std::uint32_t>(shards.ranges.size());
    absl::Time logged = absl::InfinitePast();
    for (;;) {
      std::uint64_t lo = ~0ull, hi = 0;
      for (std::uint32_t s = 0; s < n; ++s) {
        SKETCHPS_ASSIGN_OR_RETURN(std::uint64_t applied, client_->RoundsApplied(s));
        lo = std::min(lo, applied);
        hi = std::max(hi, applied);
      }
      if (lo + 1 >= want) {
        want = std::max(want, hi);
        break;
      }
      if (absl::Now() - logged > absl::Seconds(10)) {
        spdlog::info("worker {}: waiting to join at round {} (the shards have applied {})", client_->worker_id(), want,
                     lo);
        logged = absl::Now();
      }
      absl::SleepFor(kJoinPoll);
    }
    for (int pass = 0; pass < kMaxJoinPasses; ++pass) {
      auto joins = JoinEvery(shards, params, want);
      std::vector<v1::JoinResponse> answers;
      std::uint64_t agreed = want;
      bool same = true;
      for (auto& j : joins) {
        SKETCHPS_ASSIGN_OR_RETURN(auto answer, j.get());
        same = same && answer.member_from() == want && answer.rounds_applied() == want;
        agreed = std::max(agreed, answer.member_from());
        answers.push_back(std::move(answer));
      }
      if (same) {
        for (std::uint32_t s = 0; s < n; ++s)
          SKETCHPS_RETURN_IF_ERROR(Adopt(s, shards.ranges[s], answers[s], params, replica));
        spdlog::info("worker {}: joined the running job at round {}", client_->worker_id(), want);
        return want;
      }
      want = agreed;
    }
    return absl::DeadlineExceededError(
        absl::StrCat("elastic join: the shards did not agree on a first round in ", kMaxJoinPasses, " passes"));
  }

  static absl::Status Adopt(std::uint32_t shard, const ShardRange& r, const v1::JoinResponse& joined, float* params,
                            Replica& replica) {
    if (joined.range_lo() != r.lo || joined.range_hi() != r.hi) {
      return absl::FailedPreconditionError(absl::StrCat("shard ", shard, " owns [", joined.range_lo(), ", ",
                                                        joined.range_hi(), "), this worker expected [", r.lo, ", ",
                                                        r.hi, ")"));
    }
    SKETCHPS_ASSIGN_OR_RETURN(auto weights, ParseF32Bytes(joined.weights(), r.size(), "JoinResponse.weights"));
    kernels::CopyToDevice(params + r.lo, weights.data(), weights.size() * sizeof(float));
    if (!joined.optimizer_state().empty()) {
      SKETCHPS_ASSIGN_OR_RETURN(auto state,
                                ParseF32Bytes(joined.optimizer_state(), replica.optimizer(shard).state_size(),
                                              "JoinResponse.optimizer_state"));
      SKETCHPS_RETURN_IF_ERROR(replica.optimizer(shard).SetState(state));
    }
    return absl::OkStatus();
  }

  Aggregator& aggregator() override { return *client_; }
  std::uint64_t shard_rounds(std::uint32_t shard) const override { return client_->shard_rounds(shard); }

  absl::Status CheckReplica(std::uint64_t round, const ShardMap& shards, const float* params) override {
    for (std::uint32_t shard = 0; shard < shards.ranges.size(); ++shard) {
      const auto& r = shards.ranges[shard];
      const FinalReport report = client_->last_final(shard);
      const std::uint64_t mine = kernels::Checksum(params + r.lo, r.size(), exec_).value();
      if (report.rounds_applied != round + 1 || report.checksum != mine) {
        return WithReason(absl::FailedPreconditionError(absl::StrFormat(
                              "replica diverged: after round %d shard %d reports %d rounds and checksum %016x, this "
                              "worker has %016x",
                              round, shard, report.rounds_applied, report.checksum, mine)),
                          Reason::kReplicaDiverged);
      }
    }
    return absl::OkStatus();
  }

  absl::Status Finish(std::uint64_t rounds_applied) override {
    absl::Status first;
    for (std::uint32_t s = 0; s < client_->num_shards(); ++s) {
      if (auto st = client_->Leave(s, rounds_applied); !st.ok() && first.ok()) first = st;
    }
    return first;
  }

  // Every shard at once, so that unreachable shards cost one timeout in all.
  absl::Status ReportFailure(std::uint64_t rounds_applied, const std::string& reason) override {
    std::vector<std::future<absl::Status>> reports;
    for (std::uint32_t s = 0; s < client_->num_shards(); ++s) {
      reports.push_back(std::async(std::launch::async, [this, s, rounds_applied, &reason] {
        return client_->ReportFailure(s, rounds_applied, reason, kReportTimeout);
      }));
    }
    absl::Status first;
    for (auto& r : reports) {
      if (auto st = r.get(); !st.ok() && first.ok()) first = st;
    }
    return first;
  }

  TransportCounters counters() const override {
    const ClientCounters c = client_->counters();
    return TransportCounters{c.wire_up, c.wire_down, false, 0, 0, c.rpc_seconds};
  }

 private:
  std::unique_ptr<Client> client_;
  const std::optional<std::uint64_t> join_at_;  // elastic: join the running job at this round
  kernels::Scratch scratch_;                    // the replica checksum's temporaries (CheckReplica)
  const kernels::Exec exec_{nullptr, &scratch_};
  bool ahead_ = false;  // Start found shards one round apart
};

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> ConnectParameterServers(ClientOptions options,
                                                                   std::optional<std::uint64_t> join_at) {
  SKETCHPS_ASSIGN_OR_RETURN(auto client, Client::Connect(std::move(options)));
  return std::unique_ptr<Transport>(new PsTransport(std::move(client), join_at));
}

}  // namespace sketchps::ps
