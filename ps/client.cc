#include "ps/client.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/checksum.h"
#include "common/net/grpc_edge.h"
#include "common/reason.h"
#include "common/status.h"
#include "common/wire/codec.h"
#include "engine/phase_proto.h"
#include "spdlog/spdlog.h"

namespace sketchps::ps {
namespace {

// Join also retries a call that a newer Join of this worker superseded. CANCELLED: this client never
// cancels its calls (they end at their deadline), so the shard did: a shard shutting down (SIGTERM, a
// stalled accept loop) cancels the calls its gRPC server still holds, and its successor will answer.
bool Retryable(const absl::Status& s, bool join) {
  return IsTransient(s) || s.code() == absl::StatusCode::kCancelled || (join && IsSuperseded(s));
}

// While it lives, says every few seconds that `what` is still waiting, so that a worker whose
// servers are unreachable (or still assembling) never waits in silence until its patience ends.
class WaitNotice {
 public:
  WaitNotice(std::string what, absl::Duration patience)
      : thread_([this, what = std::move(what), patience] {
          const absl::Time start = absl::Now();
          while (!done_.WaitForNotificationWithTimeout(absl::Seconds(5))) {
            spdlog::warn("{}: still waiting after {} (giving up after {})", what,
                         absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Seconds(1))),
                         absl::FormatDuration(patience));
          }
        }) {}
  ~WaitNotice() {
    done_.Notify();
    thread_.join();
  }
  WaitNotice(const WaitNotice&) = delete;
  WaitNotice& operator=(const WaitNotice&) = delete;

 private:
  absl::Notification done_;
  std::thread thread_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  if (options.servers.empty()) return absl::InvalidArgumentError("--servers: no server addresses");
  if (options.rank >= options.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rank ", options.rank, " is not in [0, ", options.num_workers, ")"));
  }
  SKETCHPS_ASSIGN_OR_RETURN(auto credentials, MakeChannelCredentials(options.tls));
  std::unique_ptr<Client> client(new Client(std::move(options)));
  const auto& o = client->options_;
  for (std::uint32_t s = 0; s < o.servers.size(); ++s) {
    const std::string& address = o.servers[s];
    if (address.find(':') == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--servers: '", address, "' is not host:port"));
    }
    const std::string identity = o.tls.insecure ? "" : Identity{Identity::Role::kServer, s}.Name();
    ShardLink link;
    link.address = address;
    link.stub = v1::ParameterServer::NewStub(MakeClientChannel(address, o.max_message_bytes, credentials, identity));
    client->links_.push_back(std::move(link));
  }
  return client;
}

template <class Call>
absl::Status Client::WithRetries(std::uint32_t shard, const char* what, Call call) {
  Backoff backoff(absl::Milliseconds(50), absl::Seconds(1), options_.patience);
  const bool join = std::string_view(what) == "Join";
  std::optional<WaitNotice> notice;
  if (join) {
    notice.emplace(absl::StrCat("joining shard ", shard, " at ", links_[shard].address,
                                " (it answers once it is reachable and every worker has offered its weights)"),
                   options_.patience);
  }
  for (;;) {
    grpc::ClientContext ctx;
    // One attempt's timeout, within the patience (at least 100 ms: the attempt that finds it spent).
    const absl::Time now = absl::Now();
    ctx.set_deadline(absl::ToChronoTime(
        std::min(now + options_.rpc_timeout, std::max(backoff.deadline(), now + absl::Milliseconds(100)))));
    // Queue the call until the channel connects (a restarting shard), within the deadline, instead
    // of failing fast on the channel's last connection error.
    ctx.set_wait_for_ready(true);
    const absl::Time t0 = absl::Now();
    const absl::Status status = FromGrpcStatus(call(ctx));
    links_[shard].rpc_seconds += absl::ToDoubleSeconds(absl::Now() - t0);
    if (status.ok() || !Retryable(status, join)) return status;
    if (backoff.Expired()) {
      return absl::UnavailableError(absl::StrCat(what, " to shard ", shard, " at ", links_[shard].address,
                                                 ": no answer for ", absl::FormatDuration(options_.patience),
                                                 " (last error: ", status.message(), ")"));
    }
    spdlog::debug("{} to shard {}: attempt {} failed after {}: {}", what, shard, backoff.attempts() + 1,
                  absl::FormatDuration(absl::Now() - t0), status.ToString());
    if (backoff.attempts() % 20 == 0) {
      spdlog::warn("{} to shard {} at {}: {} (retrying for up to {})", what, shard, links_[shard].address,
                   std::string(status.message()), absl::FormatDuration(options_.patience));
    }
    if (status.code() != absl::StatusCode::kDeadlineExceeded) backoff.Wait();
  }
}

void Client::SetReplica(LayerTable layers, OfferFn offer) {
  layers_ = std::move(layers);
  offer_ = std::move(offer);
}

absl::StatusOr<v1::JoinResponse> Client::Join(std::uint32_t shard, std::uint64_t rounds_applied,
                                              const ReplicaOffer& replica, std::optional<std::uint64_t> member_from) {
  if (shard >= links_.size())
    return absl::InvalidArgumentError(absl::StrCat("shard ", shard, " has no server address"));
  ShardLink& link = links_[shard];
  v1::JoinRequest request;
  request.set_job_id(options_.job_id);
  request.set_worker_id(options_.rank);
  request.set_shard_id(shard);
  LayersToProto(layers_, request.mutable_layers());
  request.set_weights(F32Bytes(replica.weights));
  request.set_rounds_applied(rounds_applied);
  request.set_optimizer_state(F32Bytes(replica.optimizer_state));
  request.set_weights_checksum(WeightsChecksum(replica.weights));
  FingerprintToProto(options_.fingerprint, request.mutable_fingerprint());
  if (rounds_applied > 0) {
    *request.mutable_last_result() = link.last_final;
    request.set_last_result_contributors(link.last_contributors);
  }
  if (member_from) {
    request.set_elastic_join(true);
    request.set_member_from(*member_from);
  }
  v1::JoinResponse response;
  SKETCHPS_RETURN_IF_ERROR(
      WithRetries(shard, "Join", [&](grpc::ClientContext& ctx) { return link.stub->Join(&ctx, request, &response); }));
  set_range_length(shard, response.range_hi() - response.range_lo());
  return response;
}

absl::StatusOr<v1::GetWeightsResponse> Client::GetWeights(std::uint32_t shard, bool rounds_only) {
  if (shard >= links_.size())
    return absl::InvalidArgumentError(absl::StrCat("shard ", shard, " has no server address"));
  v1::GetWeightsRequest request;
  request.set_job_id(options_.job_id);
  request.set_shard_id(shard);
  request.set_rounds_only(rounds_only);
  v1::GetWeightsResponse response;
  SKETCHPS_RETURN_IF_ERROR(WithRetries(shard, "GetWeights", [&](grpc::ClientContext& ctx) {
    return links_[shard].stub->GetWeights(&ctx, request, &response);
  }));
  return response;
}

absl::StatusOr<std::uint64_t> Client::RoundsApplied(std::uint32_t shard) {
  SKETCHPS_ASSIGN_OR_RETURN(v1::GetWeightsResponse response, GetWeights(shard, /*rounds_only=*/true));
  return response.rounds_applied();
}

absl::StatusOr<v1::LeaveRequest> Client::LeaveRequestFor(std::uint32_t shard, std::uint64_t rounds_applied) const {
  if (shard >= links_.size())
    return absl::InvalidArgumentError(absl::StrCat("shard ", shard, " has no server address"));
  v1::LeaveRequest request;
  request.set_job_id(options_.job_id);
  request.set_worker_id(options_.rank);
  request.set_shard_id(shard);
  request.set_rounds_applied(rounds_applied);
  return request;
}

absl::Status Client::Leave(std::uint32_t shard, std::uint64_t rounds_applied) {
  SKETCHPS_ASSIGN_OR_RETURN(const v1::LeaveRequest request, LeaveRequestFor(shard, rounds_applied));
  v1::LeaveResponse response;
  return WithRetries(shard, "Leave",
                     [&](grpc::ClientContext& ctx) { return links_[shard].stub->Leave(&ctx, request, &response); });
}

absl::Status Client::ReportFailure(std::uint32_t shard, std::uint64_t rounds_applied, const std::string& reason,
                                   absl::Duration timeout) {
  SKETCHPS_ASSIGN_OR_RETURN(v1::LeaveRequest request, LeaveRequestFor(shard, rounds_applied));
  request.set_failed(true);
  request.set_reason(reason);
  v1::LeaveResponse response;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return FromGrpcStatus(links_[shard].stub->Leave(&ctx, request, &response));
}

void Client::set_range_length(std::uint32_t shard, std::uint64_t length) { links_.at(shard).range_len = length; }

absl::StatusOr<v1::PushPullResponse> Client::Push(std::uint32_t shard, const v1::PushPullRequest& request) {
  const std::uint64_t request_bytes = request.ByteSizeLong();
  v1::PushPullResponse response;
  SKETCHPS_RETURN_IF_ERROR(WithRetries(shard, "PushPull", [&](grpc::ClientContext& ctx) {
    wire_up_.fetch_add(request_bytes);
    return links_[shard].stub->PushPull(&ctx, request, &response);
  }));
  wire_down_.fetch_add(response.ByteSizeLong());
  return response;
}

absl::StatusOr<std::shared_ptr<const PhaseResult>> Client::RunPhase(std::uint32_t shard, std::uint64_t round,
                                                                    std::uint32_t phase, Contribution contribution) {
  if (shard >= links_.size())
    return absl::InvalidArgumentError(absl::StrCat("shard ", shard, " has no server address"));
  ShardLink& link = links_[shard];
  v1::PushPullRequest request;
  auto* header = request.mutable_payload()->mutable_header();
  header->set_job_id(options_.job_id);
  header->set_epoch(0);
  header->set_worker_id(options_.rank);
  header->set_shard_id(shard);
  header->set_round(round);
  header->set_phase(phase);
  *request.mutable_spec() = SpecToProto(contribution.spec);
  if (contribution.payload) {
    SKETCHPS_RETURN_IF_ERROR(EncodeBody(*contribution.payload, request.mutable_payload(), contribution.values));
  }
  auto response = Push(shard, request);
  for (int rejoins = 0; IsRejoin(response.status()) && offer_ && rejoins < kMaxRejoins; ++rejoins) {
    // The shard restarted and assembles its state from the workers' replicas: offer ours (as it
    // stands at the start of this round), then push again.
    spdlog::warn("shard {} restarted: joining again with this replica at round {}", shard, round);
    SKETCHPS_RETURN_IF_ERROR(Join(shard, round, offer_(shard)).status());
    response = Push(shard, request);
  }
  if (!response.ok()) return response.status();
  SKETCHPS_ASSIGN_OR_RETURN(auto body, DecodeBody(response->result(), link.range_len));
  if (!body) return absl::DataLossError(absl::StrCat("shard ", shard, ": phase result without a body"));
  link.shard_rounds = response->shard_rounds_applied();
  if (contribution.spec.final_phase) {
    link.final = FinalReport{response->rounds_applied(),
                             response->weights_checksum(),
                             {response->absent().begin(), response->absent().end()}};
    link.last_final = response->result();
    link.last_contributors = response->contributors();
  }
  auto result = std::make_shared<PhaseResult>(PhaseResult{std::move(*body), response->contributors()});
  if (response->excluded()) result->excluded = {options_.rank};
  return std::shared_ptr<const PhaseResult>(std::move(result));
}

FinalReport Client::last_final(std::uint32_t shard) const { return links_.at(shard).final; }

ClientCounters Client::counters() const {
  ClientCounters c{wire_up_.load(), wire_down_.load(), {}};
  for (const auto& link : links_) c.rpc_seconds.push_back(link.rpc_seconds);
  return c;
}

}  // namespace sketchps::ps
