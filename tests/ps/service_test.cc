// The gRPC adapter of a shard: request bodies that do not parse get INVALID_ARGUMENT naming the
// message (not gRPC's INTERNAL with an empty message), and no status leaves without a message.
#include "ps/service.h"

#include <future>

#include <catch2/catch.hpp>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "common/net/grpc_edge.h"
#include "job/job_spec.h"
#include "ps/shard_host.h"
#include "server/job_adapter.h"

using namespace sketchps;

namespace {

// The job's options with the tests' model: one layer of 4 values.
ps::HostOptions TestHostOptions(const JobSpec& job) {
  ps::HostOptions options = ps::HostOptionsFor(job, 0, "");
  options.job.layout = MakeLayerTable({{"w", {4}}});
  return options;
}

grpc::Status RawCall(const std::string& address, const std::string& method, const std::string& body) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  grpc::Slice slice(body);
  grpc::ByteBuffer request(&slice, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(s); });
  return done.get_future().get();
}

}  // namespace

TEST_CASE("Bodies that do not parse are INVALID_ARGUMENT naming the message, on every method", "[grpc][server]") {
  auto job = ParseJobSpec(DefaultJobSpecYaml(), "t", {"job_id=t", "workers=2", "servers=1"});
  REQUIRE(job.ok());
  auto host = ps::ShardHost::Open(TestHostOptions(*job), nullptr);
  REQUIRE(host.ok());
  ps::ParameterServerService service(**host, absl::Seconds(5));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  ConfigureServer(builder, ServerOptions{});
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  REQUIRE(server != nullptr);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  const std::string garbage("\x0a\xff\xff\xff\xff\x0f\x01", 7);  // a length prefix far beyond the body
  for (const auto& [method, message] :
       std::vector<std::pair<std::string, std::string>>{{"Join", "sketchps.v1.JoinRequest"},
                                                        {"PushPull", "sketchps.v1.PushPullRequest"},
                                                        {"GetWeights", "sketchps.v1.GetWeightsRequest"},
                                                        {"Leave", "sketchps.v1.LeaveRequest"}}) {
    const auto status = RawCall(address, "/sketchps.v1.ParameterServer/" + method, garbage);
    INFO(method << ": " << status.error_message());
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::Contains("7 bytes do not parse as " + message));
  }
  // A body that parses but names no job: a precise error, never an empty one.
  const auto empty = RawCall(address, "/sketchps.v1.ParameterServer/GetWeights", "");
  CHECK(empty.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK_THAT(empty.error_message(), Catch::Contains("job_id"));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

TEST_CASE("Statuses never leave without a message", "[grpc]") {
  CHECK(ToGrpcStatus(absl::InternalError("")).error_message() == "INTERNAL (no detail)");
  CHECK(ToGrpcStatus(absl::InvalidArgumentError("x: bad")).error_message() == "x: bad");
  CHECK(FromGrpcStatus(grpc::Status(grpc::StatusCode::INTERNAL, "")).message() == "gRPC status 13 without a message");
  CHECK(ToGrpcStatus(absl::OkStatus()).ok());
}

TEST_CASE("Binding is exclusive: a second server on a port in use fails to start", "[grpc]") {
  // gRPC refuses to start a server with no service, so each one carries an (unused) generic service.
  grpc::CallbackGenericService first_service, second_service;
  grpc::ServerBuilder first;
  first.RegisterCallbackGenericService(&first_service);
  int port = 0;
  first.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  ConfigureServer(first, ServerOptions{});
  auto running = first.BuildAndStart();
  REQUIRE(running != nullptr);
  REQUIRE(port > 0);
  grpc::ServerBuilder second;
  second.RegisterCallbackGenericService(&second_service);
  int second_port = 0;
  second.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(), &second_port);
  ConfigureServer(second, ServerOptions{});
  auto duplicate = second.BuildAndStart();
  CHECK((duplicate == nullptr || second_port == 0));
  running->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

TEST_CASE("The message limit follows the job: a body above the shard's largest payload is refused unread",
          "[grpc][server]") {
  auto job = ParseJobSpec(DefaultJobSpecYaml(), "t", {"job_id=t", "workers=2", "servers=1"});
  REQUIRE(job.ok());
  job->layout = MakeLayerTable({{"w", {1000}}});
  // 1000 elements: a sketch of 8 float32 cells per element plus 64 KiB of framing.
  const ServerOptions limits = ps::ServerOptionsFor(*job, 0, 0);
  CHECK(limits.max_message_bytes == 4 * 8 * 1000 + (64 << 10));
  // The memory quota holds every worker's largest message twice, at least 8 MiB.
  CHECK(limits.memory_quota_bytes == std::size_t{8} << 20);
  CHECK(ps::ServerOptionsFor(*job, 0, 100).memory_quota_bytes == 2 * 2 * (std::size_t{100} << 20));
  CHECK(ps::ServerOptionsFor(*job, 0, 3).max_message_bytes == 3 << 20);  // --max-message-mb
  CHECK(ps::ServerOptionsFor(*job, 0, 5000).max_message_bytes == 2047 << 20);

  auto host = ps::ShardHost::Open(ps::HostOptionsFor(*job, 0, ""), nullptr);
  REQUIRE(host.ok());
  ps::ParameterServerService service(**host, absl::Seconds(5));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  ConfigureServer(builder, limits);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  REQUIRE(server != nullptr);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  const std::string big(limits.max_message_bytes + 1, '\0');
  const auto refused = RawCall(address, "/sketchps.v1.ParameterServer/PushPull", big);
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  INFO(refused.error_message());
  CHECK_FALSE(IsTransient(FromGrpcStatus(refused)));  // the same message is refused again: no retry
  CHECK(IsTransient(WithReason(absl::ResourceExhaustedError("mailbox full"), Reason::kBusy)));
  CHECK_FALSE(IsTransient(absl::ResourceExhaustedError("a limit of gRPC's own")));
  CHECK(IsTransient(absl::UnavailableError("connection refused")));
  CHECK_FALSE(IsTransient(absl::InvalidArgumentError("x")));
  // Just under the limit the body reaches the handler (which names what is wrong with it).
  const auto read =
      RawCall(address, "/sketchps.v1.ParameterServer/PushPull", std::string(limits.max_message_bytes - 64, '\0'));
  CHECK(read.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}
