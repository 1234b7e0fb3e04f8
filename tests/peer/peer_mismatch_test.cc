// Decentralized start with a misconfigured rank (peer/transport.h): every rank names the
// differing job key, not only the first to probe the misconfigured one. The rank that finds the
// mismatch stays reachable for a moment, so that the others probe it and compare fingerprints too.
#include <future>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/layout.h"
#include "common/reason.h"
#include "common/status.h"
#include "engine/replica.h"
#include "job/job_spec.h"
#include "launch/ports.h"
#include "peer/transport.h"

using namespace sketchps;

TEST_CASE("Every rank names the differing job key when one rank runs another job", "[processes]") {
  auto job = LoadJobSpec("", {"model=mlp", "workers=3", "mode=decentralized"});
  REQUIRE(job.ok());
  auto shards = MakeShardMap(job->layout, 1);
  REQUIRE(shards.ok());
  std::vector<std::string> peers;
  for (int r = 0; r < 3; ++r) {
    auto port = launch::FreeLocalPort();
    REQUIRE(port.ok());
    peers.push_back("127.0.0.1:" + std::to_string(*port));
  }
  auto start = [&](std::uint32_t rank) -> absl::Status {
    peer::PeerOptions o;
    o.job_id = job->job_id;
    o.rank = rank;
    o.num_workers = 3;
    o.listen = peers[rank];
    o.peers = peers;
    o.patience = absl::Seconds(20);
    o.fingerprint = {{"scheme", 1}, {"optimizer", rank == 2 ? 7u : 3u}};  // rank 2: another learning rate
    SKETCHPS_ASSIGN_OR_RETURN(auto transport, peer::StartPeers(o, *shards));
    ReplicaOptions ro{
        rank,           3, *shards, job->layout, job->scheme.make, job->scheme.density, job->scheme.global_momentum,
        job->optimizer, 1, false};
    SKETCHPS_ASSIGN_OR_RETURN(auto replica, Replica::Create(ro));
    std::vector<float> params(job->layout.dim(), 0.0f);
    return transport->Start(job->layout, *shards, params.data(), *replica).status();
  };
  std::vector<std::future<absl::Status>> ranks;
  for (std::uint32_t r = 0; r < 3; ++r) ranks.push_back(std::async(std::launch::async, start, r));
  for (std::uint32_t r = 0; r < 3; ++r) {
    const absl::Status st = ranks[r].get();
    INFO("rank " << r << ": " << st.ToString());
    CHECK(IsFingerprintMismatch(st));
    CHECK_THAT(std::string(st.message()), Catch::Contains("optimizer") && !Catch::Contains("scheme"));
  }
}
