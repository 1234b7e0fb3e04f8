// The sketchps.v1.ParameterServer gRPC service on gRPC's callback API: a thin adapter over ShardHost
// (which validates and does the work). No thread waits for a phase: a PushPull's reaction validates
// and submits, and the call is finished from the shard's strand when the phase result is published,
// or with DEADLINE_EXCEEDED when --max-wait-seconds passes or the client's deadline draws near (an
// alarm, a tenth of the time left before it, at most 1 s), whichever comes first: the message names
// the workers the phase still waits for (ShardHost::WaitingFor); a late result is then dropped. Join works the same way
// while the shard assembles its state. absl codes map 1:1 onto gRPC codes (common/net/grpc_edge.h).
//
// The methods take the raw request bytes and parse them here, so that a body that does not parse
// is INVALID_ARGUMENT naming the message ("request: 37 bytes do not parse as
// sketchps.v1.PushPullRequest") rather than gRPC's INTERNAL with an empty message.
//
// With require_identity (the server runs with TLS), a call without a client certificate (the
// plaintext health port) is UNAUTHENTICATED; the caller's identity goes to the host.
#pragma once

#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"
#include "ps/shard_host.h"
#include "sketchps/v1/parameter_server.grpc.pb.h"

namespace sketchps::ps {

using RawParameterServer = v1::ParameterServer::WithRawCallbackMethod_Join<
    v1::ParameterServer::WithRawCallbackMethod_PushPull<v1::ParameterServer::WithRawCallbackMethod_GetWeights<
        v1::ParameterServer::WithRawCallbackMethod_Leave<v1::ParameterServer::Service>>>>;

class ParameterServerService final : public RawParameterServer {
 public:
  ParameterServerService(ShardHost& host, absl::Duration max_wait, bool require_identity = false)
      : host_(host), max_wait_(max_wait), require_identity_(require_identity) {}

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetWeights(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;

 private:
  absl::StatusOr<std::optional<Identity>> Caller(const grpc::CallbackServerContext& ctx) const;

  ShardHost& host_;
  const absl::Duration max_wait_;
  const bool require_identity_;
};

}  // namespace sketchps::ps
