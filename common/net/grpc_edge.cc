#include "common/net/grpc_edge.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include <grpcpp/resource_quota.h>

#include "absl/strings/str_cat.h"
#include "common/reason.h"
#include "sketchps/v1/error.pb.h"

namespace sketchps {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  if (message.empty()) message = absl::StrCat(absl::StatusCodeToString(status.code()), " (no detail)");
  if (RewordingForTests()) message = RewordForTests(message);
  const Reason reason = ReasonOf(status);
  if (reason == Reason::kNone) return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message);
  v1::ErrorDetail detail;
  detail.set_reason(static_cast<std::uint32_t>(reason));
  detail.set_reason_name(ReasonName(reason));
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message, detail.SerializeAsString());
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  std::string message = status.error_message();
  if (message.empty())
    message = absl::StrCat("gRPC status ", static_cast<int>(status.error_code()), " without a message");
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()), message);
  v1::ErrorDetail detail;
  Reason reason = Reason::kNone;
  if (!status.error_details().empty() && detail.ParseFromString(status.error_details())) {
    reason = ReasonFromNumber(detail.reason());
  }
  // Another process refused what this one sent: not a configuration error of this process.
  if (reason == Reason::kNone && out.code() == absl::StatusCode::kInvalidArgument) reason = Reason::kRefused;
  return WithReason(std::move(out), reason);
}

bool RewordingForTests() {
  const char* v = std::getenv("SKETCHPS_TEST_REWORD_ERRORS");
  return v != nullptr && std::string_view(v) == "1";
}

std::string RewordForTests(absl::string_view message) {
  // Reversed words keep the message unique and readable in a log, and break every substring match.
  std::string out = "[reworded] ";
  for (auto it = message.rbegin(); it != message.rend(); ++it) out.push_back(*it);
  return out;
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
  if (options.max_read_chunk_bytes > 0) {
    builder.AddChannelArgument(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, options.max_read_chunk_bytes);
  }
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
