#include "tools/health.h"

#include <chrono>
#include <cstdio>

#include <grpcpp/grpcpp.h>

#include "grpc/health/v1/health.grpc.pb.h"

namespace sketchps::tools {

int CheckHealth(const std::string& address, const std::string& service, double timeout_seconds) {
  auto stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<long>(timeout_seconds * 1000)));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&ctx, request, &response);
  if (!status.ok()) {
    std::fprintf(stderr, "%s: health check failed: %s\n", address.c_str(), status.error_message().c_str());
    return 1;
  }
  const auto& name = grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  std::printf("%s: %s\n", address.c_str(), name.c_str());
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

}  // namespace sketchps::tools
