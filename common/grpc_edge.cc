#include "common/grpc_edge.h"

#include <algorithm>

#include <grpcpp/resource_quota.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace sketchps {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  if (message.empty()) message = absl::StrCat(absl::StatusCodeToString(status.code()), " (no detail)");
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message);
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  std::string message = status.error_message();
  if (message.empty())
    message = absl::StrCat("gRPC status ", static_cast<int>(status.error_code()), " without a message");
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), message);
}

bool IsTransient(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded: return true;
    case absl::StatusCode::kResourceExhausted: return !absl::StrContains(status.message(), "message larger than max");
    default: return false;
  }
}

void ConfigureServer(grpc::ServerBuilder& builder, const ServerOptions& options) {
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(options.handshake_timeout)));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (options.memory_quota_bytes > 0) {
    grpc::ResourceQuota quota("sketchps-server");
    quota.Resize(options.memory_quota_bytes);
    builder.SetResourceQuota(quota);
  }
}

std::shared_ptr<grpc::Channel> MakeClientChannel(const std::string& address, int max_message_bytes,
                                                 const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                                                 const std::string& identity) {
  grpc::ChannelArguments args;
  if (!identity.empty()) args.SetSslTargetNameOverride(identity);
  args.SetMaxReceiveMessageSize(max_message_bytes);
  args.SetMaxSendMessageSize(max_message_bytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(address, credentials, args);
}

Backoff::Backoff(absl::Duration initial, absl::Duration max, absl::Duration patience)
    : max_(max), patience_(patience), next_(initial) {}

bool Backoff::Wait() {
  if (Expired()) return false;
  ++attempts_;
  absl::SleepFor(std::min(next_, std::max(absl::ZeroDuration(), patience_ - (absl::Now() - start_))));
  next_ = std::min(next_ * 2, max_);
  return true;
}

}  // namespace sketchps
