// The workers' client (ps/client.h) against a server that never answers.
#include "ps/client.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/time/clock.h"
#include "launch/ports.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

using namespace sketchps;

namespace {

// A client of one shard at a port nobody listens on (it was free a moment ago).
std::unique_ptr<ps::Client> UnreachableShard(absl::Duration rpc_timeout, absl::Duration patience,
                                             std::string* address) {
  auto port = launch::FreeLocalPort();
  REQUIRE(port.ok());
  ps::ClientOptions o;
  o.job_id = "j";
  o.servers = {"127.0.0.1:" + std::to_string(*port)};
  o.rpc_timeout = rpc_timeout;
  o.patience = patience;
  o.tls.insecure = true;
  auto client = ps::Client::Connect(o);
  REQUIRE(client.ok());
  *address = o.servers[0];
  return *std::move(client);
}

}  // namespace

TEST_CASE("A Join to an unreachable shard says it is waiting every few seconds, then names the shard", "[processes]") {
  std::string address;
  auto client = UnreachableShard(absl::Seconds(2), absl::Seconds(12), &address);
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::default_logger()->sinks().push_back(sink);
  std::vector<float> weights(4, 0.0f);
  const absl::Time start = absl::Now();
  auto joined = client->Join(0, 0, ps::ReplicaOffer{weights, {}});
  const absl::Duration waited = absl::Now() - start;
  spdlog::default_logger()->sinks().pop_back();
  REQUIRE(!joined.ok());
  CHECK(joined.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(joined.status().message()), Catch::Contains("shard 0 at " + address));
  CHECK(waited >= absl::Seconds(12));
  std::size_t notices = 0;
  for (std::size_t at = log.str().find("still waiting"); at != std::string::npos;
       at = log.str().find("still waiting", at + 1)) {
    ++notices;
  }
  INFO(log.str());
  CHECK(notices >= 2);  // at 5 s and 10 s
  CHECK_THAT(log.str(), Catch::Contains("joining shard 0 at 127.0.0.1:"));
}

TEST_CASE("No attempt outlasts the patience: a patience shorter than the RPC timeout is kept", "[processes]") {
  std::string address;
  auto client = UnreachableShard(absl::Seconds(30), absl::Seconds(1), &address);
  std::vector<float> weights(4, 0.0f);
  const absl::Time start = absl::Now();
  auto joined = client->Join(0, 0, ps::ReplicaOffer{weights, {}});
  const absl::Duration waited = absl::Now() - start;
  REQUIRE(!joined.ok());
  CHECK_THAT(std::string(joined.status().message()), Catch::Contains("no answer for 1s"));
  CHECK(waited >= absl::Seconds(1));
  CHECK(waited < absl::Seconds(15));  // one attempt of the 30 s timeout would end past it (it did: 21 s of 2 s)
}
