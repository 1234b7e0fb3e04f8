// Identity on the wire: a parameter server with mutual TLS (certificates from `sketchps certs`)
// refuses clients without a certificate or with one of another CA at the handshake, binds every
// request's worker id to the caller's certificate, and serves only health on its plaintext port.
#include "common/net/tls.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <future>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "common/checksum.h"
#include "common/net/grpc_edge.h"
#include "common/wire/codec.h"
#include "engine/phase_proto.h"
#include "job/job_spec.h"
#include "ps/service.h"
#include "ps/shard_host.h"
#include "server/job_adapter.h"
#include "sketchps/v1/parameter_server.grpc.pb.h"
#include "tools/certs.h"

using namespace sketchps;

namespace {

// The job's options with the tests' model: one layer of 4 values.
ps::HostOptions TestHostOptions(const JobSpec& job) {
  ps::HostOptions options = ps::HostOptionsFor(job, 0, "");
  options.job.layout = MakeLayerTable({{"w", {4}}});
  return options;
}

namespace fs = std::filesystem;
constexpr std::uint64_t kDim = 4;

struct TlsServer {
  explicit TlsServer(const fs::path& dir, ServerOptions server_options = {}) {
    auto job = ParseJobSpec(DefaultJobSpecYaml(), "t", {"job_id=t", "workers=2", "servers=1", "scheme.name=dense"});
    REQUIRE(job.ok());
    auto opened = ps::ShardHost::Open(TestHostOptions(*job), nullptr);
    REQUIRE(opened.ok());
    host = *std::move(opened);
    service = std::make_unique<ps::ParameterServerService>(*host, absl::Seconds(5), /*require_identity=*/true);
    auto credentials = MakeServerCredentials(TlsConfig::FromDir(dir.string(), Identity{Identity::Role::kServer, 0}));
    REQUIRE(credentials.ok());
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", *credentials, &port);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &health_port);
    ConfigureServer(builder, server_options);
    builder.RegisterService(service.get());
    server = builder.BuildAndStart();
    REQUIRE(server != nullptr);
  }
  ~TlsServer() { server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1)); }

  std::unique_ptr<ps::ShardHost> host;
  std::unique_ptr<ps::ParameterServerService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0, health_port = 0;
};

std::unique_ptr<v1::ParameterServer::Stub> Stub(int port, const TlsConfig& tls,
                                                const std::string& identity = "server-0") {
  auto credentials = MakeChannelCredentials(tls);
  REQUIRE(credentials.ok());
  return v1::ParameterServer::NewStub(
      MakeClientChannel("127.0.0.1:" + std::to_string(port), 1 << 20, *credentials, tls.insecure ? "" : identity));
}

v1::JoinRequest JoinRequest(std::uint32_t worker) {
  const std::vector<float> w(kDim, 1.0f);
  v1::JoinRequest r;
  r.set_job_id("t");
  r.set_worker_id(worker);
  r.set_shard_id(0);
  LayersToProto(MakeLayerTable({{"w", {static_cast<std::int64_t>(kDim)}}}), r.mutable_layers());
  r.set_weights(F32Bytes(w));
  r.set_weights_checksum(WeightsChecksum(w));
  return r;
}

grpc::Status Join(v1::ParameterServer::Stub& stub, const v1::JoinRequest& request,
                  absl::Duration timeout = absl::Seconds(5)) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  v1::JoinResponse response;
  return stub.Join(&ctx, request, &response);
}

TlsConfig As(const fs::path& dir, std::uint32_t worker) {
  return TlsConfig::FromDir(dir.string(), Identity{Identity::Role::kWorker, worker});
}

}  // namespace

TEST_CASE("Identity parsing and the worker check name both sides", "[tls]") {
  CHECK(ParseIdentity("worker-12")->index == 12);
  CHECK(ParseIdentity("server-0")->role == Identity::Role::kServer);
  for (const char* bad : {"worker-", "worker-x", "worker-01", "admin-1", "worker--1", ""})
    CHECK(!ParseIdentity(bad).ok());
  CHECK(CheckWorker(std::nullopt, 3, "f").ok());
  CHECK(CheckWorker(Identity{Identity::Role::kWorker, 3}, 3, "f").ok());
  CHECK(CheckWorker(Identity{Identity::Role::kWorker, 2}, 3, "f").message() == "f: worker-2 cannot speak for worker 3");
  CHECK(CheckWorker(Identity{Identity::Role::kServer, 3}, 3, "f").code() == absl::StatusCode::kPermissionDenied);
}

TEST_CASE("A TLS parameter server binds requests to certificates and refuses strangers", "[tls][grpc]") {
  const fs::path dir = fs::temp_directory_path() / ("sketchps-tls-" + std::to_string(::getpid()));
  const fs::path other = dir / "other";
  fs::remove_all(dir);
  REQUIRE(tools::MakeCerts(tools::CertsOptions{dir.string(), 2, 1}).ok());
  REQUIRE(tools::MakeCerts(tools::CertsOptions{other.string(), 2, 1}).ok());  // another CA
  TlsServer server(dir);

  // No certificate, or one from another CA: the handshake fails, nothing reaches the shard.
  CHECK(Join(*Stub(server.port, TlsConfig{}), JoinRequest(0), absl::Seconds(2)).error_code() ==
        grpc::StatusCode::UNAVAILABLE);
  CHECK(Join(*Stub(server.port, As(other, 0)), JoinRequest(0), absl::Seconds(2)).error_code() ==
        grpc::StatusCode::UNAVAILABLE);
  // A client expecting another server identity does not accept this one.
  CHECK(Join(*Stub(server.port, As(dir, 0), "server-1"), JoinRequest(0), absl::Seconds(2)).error_code() ==
        grpc::StatusCode::UNAVAILABLE);
  // The plaintext port serves health only.
  const auto plain = Join(*Stub(server.health_port, TlsConfig{}), JoinRequest(0));
  CHECK(plain.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  // Worker 1's certificate cannot join as worker 0.
  const auto forged = Join(*Stub(server.port, As(dir, 1)), JoinRequest(0));
  CHECK(forged.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK_THAT(forged.error_message(), Catch::Contains("worker-1 cannot speak for worker 0"));
  CHECK_THAT(server.host->AssemblyStatus(), Catch::Contains("0 of 2 joined"));
  // Each worker as itself: both joins are answered.
  auto stub0 = Stub(server.port, As(dir, 0));
  auto stub1 = Stub(server.port, As(dir, 1));
  auto first = std::async(std::launch::async, [&] { return Join(*stub0, JoinRequest(0)); });
  CHECK(Join(*stub1, JoinRequest(1)).ok());
  CHECK(first.get().ok());
  fs::remove_all(dir);
}

TEST_CASE("TLS files are checked at start: certificates outside their dates, world-readable keys", "[tls]") {
  const fs::path dir = fs::temp_directory_path() / ("sketchps-tls-dates-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const Identity self{Identity::Role::kServer, 0};
  SECTION("expired") {
    REQUIRE(tools::MakeCerts({dir.string(), 0, 1, 30, false, -40}).ok());
    auto made = MakeServerCredentials(TlsConfig::FromDir(dir.string(), self));
    CHECK(made.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(made.status().message()), Catch::Contains("expired on") && Catch::Contains("ca.pem"));
  }
  SECTION("not yet valid (a clock behind)") {
    REQUIRE(tools::MakeCerts({dir.string(), 1, 0, 30, false, 2}).ok());
    auto made = MakeChannelCredentials(TlsConfig::FromDir(dir.string(), Identity{Identity::Role::kWorker, 0}));
    CHECK(made.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(made.status().message()), Catch::Contains("not valid before"));
  }
  SECTION("a key every user can read") {
    REQUIRE(tools::MakeCerts({dir.string(), 0, 1, 30, false, 0}).ok());
    REQUIRE(MakeServerCredentials(TlsConfig::FromDir(dir.string(), self)).ok());
    fs::permissions(dir / "server-0.key", fs::perms::others_read, fs::perm_options::add);
    auto made = MakeServerCredentials(TlsConfig::FromDir(dir.string(), self));
    CHECK(made.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(made.status().message()),
               Catch::Contains("server-0.key") && Catch::Contains("readable by every user"));
    fs::permissions(dir / "server-0.key", fs::perms::group_read, fs::perm_options::add);
    fs::permissions(dir / "server-0.key", fs::perms::others_read, fs::perm_options::remove);
    CHECK(MakeServerCredentials(TlsConfig::FromDir(dir.string(), self)).ok());  // group-readable (fsGroup mounts)
  }
  fs::remove_all(dir);
}

TEST_CASE("A connection that never starts its TLS handshake is closed after the handshake timeout", "[tls][grpc]") {
  const fs::path dir = fs::temp_directory_path() / ("sketchps-tls-idle-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  REQUIRE(tools::MakeCerts(tools::CertsOptions{dir.string(), 1, 1}).ok());
  ServerOptions options;
  options.handshake_timeout = absl::Seconds(1);
  TlsServer server(dir, options);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(server.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  timeval bound{20, 0};  // far above the timeout; gRPC's default would hold the socket for 120 s
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
  const absl::Time t0 = absl::Now();
  char byte = 0;
  const ssize_t got = ::recv(fd, &byte, 1, 0);  // sends nothing: waits for the server to hang up
  const absl::Duration held = absl::Now() - t0;
  ::close(fd);
  CHECK(got <= 0);
  CHECK(held < absl::Seconds(10));
  fs::remove_all(dir);
}
