// Peers compare job fingerprints when they connect (PeerAggregator::CheckPeers): two workers started
// with job files that differ in what they compute stop at start with FAILED_PRECONDITION naming the
// keys, instead of training apart.
#include <catch2/catch.hpp>

#include "peer/peer_aggregator.h"
#include "peer/service.h"
#include "peer_group.h"

using namespace sketchps;

TEST_CASE("Peers whose job fingerprints differ refuse to start together, naming the keys", "[peer]") {
  std::vector<std::unique_ptr<peer::PeerServer>> servers;
  std::vector<std::string> addresses;
  for (std::uint32_t r = 0; r < 2; ++r) {
    peer::PeerConfig c = testing::PeerBase("fp", {8});
    c.rank = r;
    c.num_workers = 2;
    c.fingerprint = {{"scheme", 11}, {"optimizer", r == 0 ? 1u : 2u}};  // rank 1 has another lr
    auto server = peer::PeerServer::Start("127.0.0.1:0", c);
    REQUIRE(server.ok());
    addresses.push_back("127.0.0.1:" + std::to_string((*server)->port()));
    servers.push_back(*std::move(server));
  }
  auto agg = peer::PeerAggregator::Create(servers[0]->endpoint(), addresses);
  REQUIRE(agg.ok());
  const absl::Status checked = (*agg)->CheckPeers(absl::Seconds(5));
  CHECK(checked.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(checked.message()), Catch::Contains("optimizer") && !Catch::Contains("scheme"));
}
