#include "worker/ps_client.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/codec.h"
#include "common/grpc_channel.h"
#include "common/status.h"
#include "engine/wire.h"
#include "spdlog/spdlog.h"

namespace sketchps::worker {
namespace {

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

bool Retryable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(ClientOptions options) {
  if (options.servers.empty()) return absl::InvalidArgumentError("--servers: no server addresses");
  if (options.worker_id >= options.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("--rank ", options.worker_id, " is not in [0, ", options.num_workers, ")"));
  }
  std::unique_ptr<PsClient> client(new PsClient(std::move(options)));
  for (const auto& address : client->options_.servers) {
    if (address.find(':') == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--servers: '", address, "' is not host:port"));
    }
    ShardLink link;
    link.address = address;
    link.stub = v1::ParameterServer::NewStub(MakeClientChannel(address, client->options_.max_message_bytes));
    client->links_.push_back(std::move(link));
  }
  return client;
}

template <class Call>
grpc::Status PsClient::WithRetries(std::uint32_t shard, const char* what, Call call) {
  const absl::Time start = absl::Now();
  absl::Duration backoff = absl::Milliseconds(50);
  int attempt = 0;
  for (;;) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
    // Queue the call until the channel connects (a restarting shard), within the deadline, instead
    // of failing fast on the channel's last connection error.
    ctx.set_wait_for_ready(true);
    const absl::Time t0 = absl::Now();
    grpc::Status status = call(ctx);
    links_[shard].rpc_seconds += absl::ToDoubleSeconds(absl::Now() - t0);
    if (status.ok() || !Retryable(status)) return status;
    if (absl::Now() - start > options_.patience) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat(what, " to shard ", shard, " at ", links_[shard].address, ": no answer for ",
                                       absl::FormatDuration(options_.patience), " (last error: ", status.error_message(), ")"));
    }
    spdlog::debug("{} to shard {}: attempt {} failed after {}: {} ({})", what, shard, attempt + 1,
                  absl::FormatDuration(absl::Now() - t0), status.error_message(), static_cast<int>(status.error_code()));
    if (++attempt % 20 == 1) {
      spdlog::warn("{} to shard {} at {}: {} (retrying for up to {})", what, shard, links_[shard].address,
                   status.error_message(), absl::FormatDuration(options_.patience));
    }
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(1));
    }
  }
}

absl::StatusOr<v1::JoinResponse> PsClient::Join(std::uint32_t shard, const LayerTable& layers, std::span<const float> initial) {
  if (shard >= links_.size()) return absl::InvalidArgumentError(absl::StrCat("shard ", shard, " has no server address"));
  v1::JoinRequest request;
  request.set_job_id(options_.job_id);
  request.set_worker_id(options_.worker_id);
  request.set_shard_id(shard);
  LayersToProto(layers, request.mutable_layers());
  request.set_initial_weights(F32Bytes(initial));
  v1::JoinResponse response;
  const grpc::Status st = WithRetries(shard, "Join", [&](grpc::ClientContext& ctx) {
    return links_[shard].stub->Join(&ctx, request, &response);
  });
  if (!st.ok()) return FromGrpc(st);
  set_range_length(shard, response.range_hi() - response.range_lo());
  return response;
}

absl::StatusOr<v1::GetWeightsResponse> PsClient::GetWeights(std::uint32_t shard) {
  if (shard >= links_.size()) return absl::InvalidArgumentError(absl::StrCat("shard ", shard, " has no server address"));
  v1::GetWeightsRequest request;
  request.set_job_id(options_.job_id);
  request.set_shard_id(shard);
  v1::GetWeightsResponse response;
  const grpc::Status st = WithRetries(shard, "GetWeights", [&](grpc::ClientContext& ctx) {
    return links_[shard].stub->GetWeights(&ctx, request, &response);
  });
  if (!st.ok()) return FromGrpc(st);
  return response;
}

void PsClient::set_range_length(std::uint32_t shard, std::uint64_t length) { links_.at(shard).range_len = length; }

absl::StatusOr<std::shared_ptr<const PhaseResult>> PsClient::RunPhase(std::uint32_t shard, std::uint64_t round,
                                                                      std::uint32_t phase, Contribution contribution) {
  if (shard >= links_.size()) return absl::InvalidArgumentError(absl::StrCat("shard ", shard, " has no server address"));
  ShardLink& link = links_[shard];
  v1::PushPullRequest request;
  auto* header = request.mutable_payload()->mutable_header();
  header->set_job_id(options_.job_id);
  header->set_epoch(0);
  header->set_worker_id(options_.worker_id);
  header->set_shard_id(shard);
  header->set_round(round);
  header->set_phase(phase);
  *request.mutable_spec() = SpecToProto(contribution.spec);
  if (contribution.payload) SKETCHPS_RETURN_IF_ERROR(EncodeBody(*contribution.payload, request.mutable_payload()));
  const std::uint64_t request_bytes = request.ByteSizeLong();
  v1::PushPullResponse response;
  const grpc::Status st = WithRetries(shard, "PushPull", [&](grpc::ClientContext& ctx) {
    wire_up_.fetch_add(request_bytes);
    return link.stub->PushPull(&ctx, request, &response);
  });
  if (!st.ok()) return FromGrpc(st);
  wire_down_.fetch_add(response.ByteSizeLong());
  SKETCHPS_ASSIGN_OR_RETURN(auto body, DecodeBody(response.result(), link.range_len));
  if (!body) return absl::DataLossError(absl::StrCat("shard ", shard, ": phase result without a body"));
  if (contribution.spec.final_phase) link.final = FinalReport{response.rounds_applied(), response.weights_checksum()};
  return std::make_shared<const PhaseResult>(PhaseResult{std::move(*body), response.contributors()});
}

FinalReport PsClient::last_final(std::uint32_t shard) const { return links_.at(shard).final; }

ClientCounters PsClient::counters() const {
  ClientCounters c{wire_up_.load(), wire_down_.load(), {}};
  for (const auto& link : links_) c.rpc_seconds.push_back(link.rpc_seconds);
  return c;
}

}  // namespace sketchps::worker
