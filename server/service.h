// The sketchps.v1.ParameterServer gRPC service: a thin synchronous adapter over ShardHost (which
// validates and does the work). absl status codes map 1:1 onto gRPC codes, messages unchanged.
#pragma once

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "server/shard_host.h"
#include "sketchps/v1/parameter_server.grpc.pb.h"

namespace sketchps::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

class ParameterServerService final : public v1::ParameterServer::Service {
 public:
  explicit ParameterServerService(ShardHost& host) : host_(host) {}

  grpc::Status Join(grpc::ServerContext* ctx, const v1::JoinRequest* request, v1::JoinResponse* response) override;
  grpc::Status PushPull(grpc::ServerContext* ctx, const v1::PushPullRequest* request,
                        v1::PushPullResponse* response) override;
  grpc::Status GetWeights(grpc::ServerContext* ctx, const v1::GetWeightsRequest* request,
                          v1::GetWeightsResponse* response) override;

 private:
  ShardHost& host_;
};

// Server-side channel arguments every sketchps gRPC server uses: message size limit, keepalive
// policy that accepts the clients' 10 s pings.
void ConfigureServerBuilder(grpc::ServerBuilder& builder, int max_message_bytes);

}  // namespace sketchps::server
