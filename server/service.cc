#include "server/service.h"

#include <chrono>

#include "absl/time/clock.h"

namespace sketchps::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

namespace {

template <class Response>
grpc::Status Reply(absl::StatusOr<Response> result, Response* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status ParameterServerService::Join(grpc::ServerContext*, const v1::JoinRequest* request,
                                          v1::JoinResponse* response) {
  return Reply(host_.Join(*request), response);
}

grpc::Status ParameterServerService::PushPull(grpc::ServerContext* ctx, const v1::PushPullRequest* request,
                                              v1::PushPullResponse* response) {
  const auto deadline = ctx->deadline();
  const absl::Time until = deadline == std::chrono::system_clock::time_point::max() ? absl::InfiniteFuture()
                                                                                   : absl::FromChrono(deadline);
  return Reply(host_.PushPull(*request, until), response);
}

grpc::Status ParameterServerService::GetWeights(grpc::ServerContext*, const v1::GetWeightsRequest* request,
                                                v1::GetWeightsResponse* response) {
  return Reply(host_.GetWeights(*request), response);
}

void ConfigureServerBuilder(grpc::ServerBuilder& builder, int max_message_bytes) {
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  builder.SetMaxSendMessageSize(max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
}

}  // namespace sketchps::server
