// Identity between peers: with mutual TLS every letter and abort notice must come from the
// certificate of the rank it claims; a forged one is PERMISSION_DENIED and stores nothing, and
// after a regroup the renumbered ranks keep their certificates' identities.
#include "common/net/tls.h"

#include <unistd.h>

#include <filesystem>

#include <catch2/catch.hpp>

#include "common/net/grpc_edge.h"
#include "engine/phase_proto.h"
#include "peer/service.h"
#include "tools/certs.h"

using namespace sketchps;

namespace {

namespace fs = std::filesystem;

TlsConfig As(const fs::path& dir, std::uint32_t worker) {
  return TlsConfig::FromDir(dir.string(), Identity{Identity::Role::kWorker, worker});
}

v1::ExchangeRequest Letter(std::uint32_t sender, bool abort) {
  v1::ExchangeRequest r;
  auto* h = r.mutable_header();
  h->set_job_id("tls");
  h->set_worker_id(sender);
  h->set_shard_id(0);
  r.set_step(1);
  *r.mutable_spec() = SpecToProto(PhaseSpec{Reduction::kDenseSum});
  r.set_contributors(1);
  if (abort) {
    r.set_abort_code(static_cast<int>(absl::StatusCode::kUnavailable));
    r.set_abort_message("forged");
  } else {
    auto* item = r.add_items();
    item->set_origin(sender);
    REQUIRE(EncodeBody(DenseValues{std::vector<float>(4, 1.0f)}, item->mutable_payload()).ok());
  }
  return r;
}

grpc::Status Send(int port, const TlsConfig& tls, const v1::ExchangeRequest& r) {
  auto credentials = MakeChannelCredentials(tls);
  REQUIRE(credentials.ok());
  auto stub =
      v1::Peer::NewStub(MakeClientChannel("127.0.0.1:" + std::to_string(port), 1 << 20, *credentials, "worker-0"));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::ExchangeResponse response;
  return stub->Exchange(&ctx, r, &response);
}

}  // namespace

TEST_CASE("Peers accept letters and abort notices only from the rank's own certificate", "[peer][tls][grpc]") {
  const fs::path dir = fs::temp_directory_path() / ("sketchps-peer-tls-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  REQUIRE(tools::MakeCerts(tools::CertsOptions{dir.string(), 3, 0}).ok());
  peer::PeerConfig config;
  config.job_id = "tls";
  config.rank = 0;
  config.num_workers = 2;
  config.range_lengths = {4};
  config.tls = As(dir, 0);
  SECTION("ranks are their certificates") {
    auto server = peer::PeerServer::Start("127.0.0.1:0", config);
    REQUIRE(server.ok());
    const int port = (*server)->port();
    for (bool abort : {false, true}) {
      const auto forged = Send(port, As(dir, 2), Letter(1, abort));  // worker-2 poses as rank 1
      CHECK(forged.error_code() == grpc::StatusCode::PERMISSION_DENIED);
      CHECK_THAT(forged.error_message(), Catch::Contains("worker-2 cannot speak for worker 1"));
    }
    CHECK((*server)->endpoint()->mailbox.HeldLetters(0) == 0);
    CHECK(Send(port, As(dir, 1), Letter(1, false)).ok());  // rank 1 itself
    CHECK((*server)->endpoint()->mailbox.HeldLetters(0) == 1);
  }
  SECTION("after a regroup, rank 1 is the certificate of the job's rank 2") {
    config.identities = {0, 2};
    auto server = peer::PeerServer::Start("127.0.0.1:0", config);
    REQUIRE(server.ok());
    CHECK(Send((*server)->port(), As(dir, 1), Letter(1, false)).error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(Send((*server)->port(), As(dir, 2), Letter(1, false)).ok());
  }
  fs::remove_all(dir);
}
