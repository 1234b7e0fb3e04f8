// The regroup agreement (peer/regroup.h) with real Peer servers on loopback: survivors agree on the
// members and the lowest next round, dead ranks are left out, a minority stops, a late rank is left
// out, and requests for another job or epoch are refused.
#include <future>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/time/clock.h"
#include "common/reason.h"
#include "peer/service.h"

using namespace sketchps;
using namespace sketchps::peer;

namespace {

// P Peer servers with armed regroupers; Kill(r) shuts rank r's server down.
struct Group {
  Group(std::uint32_t p, absl::Duration window) {
    for (std::uint32_t r = 0; r < p; ++r) {
      PeerConfig c;
      c.job_id = "regroup";
      c.rank = r;
      c.num_workers = p;
      c.range_lengths = {8};
      auto server = PeerServer::Start("127.0.0.1:0", c);
      REQUIRE(server.ok());
      peers.push_back("127.0.0.1:" + std::to_string((*server)->port()));
      servers.push_back(*std::move(server));
    }
    for (std::uint32_t r = 0; r < p; ++r) {
      REQUIRE(servers[r]->regrouper().Arm(RegroupConfig{"regroup", 0, r, peers, window, {}, {}}).ok());
    }
  }
  void Kill(std::uint32_t r) { servers[r]->Shutdown(absl::ZeroDuration()); }
  // Every rank in `ranks` asks at once, with its next round.
  std::vector<absl::StatusOr<RegroupPlan>> AskAll(const std::vector<std::pair<std::uint32_t, std::uint64_t>>& ranks,
                                                  const std::set<std::uint32_t>& evict = {}) {
    std::vector<std::future<absl::StatusOr<RegroupPlan>>> calls;
    for (auto [r, next] : ranks) {
      calls.push_back(std::async(
          std::launch::async, [this, r = r, next = next, evict] { return servers[r]->regrouper().Ask(next, evict); }));
    }
    std::vector<absl::StatusOr<RegroupPlan>> out;
    for (auto& c : calls) out.push_back(c.get());
    return out;
  }
  std::vector<std::string> peers;
  std::vector<std::unique_ptr<PeerServer>> servers;
};

std::string Message(const absl::Status& s) { return std::string(s.message()); }

}  // namespace

TEST_CASE("Survivors agree on the members and the lowest next round, and dead ranks are left out", "[peer][regroup]") {
  Group g(5, absl::Seconds(20));
  g.Kill(0);  // the lowest rank: the coordinator must be the next one
  g.Kill(3);
  const absl::Time start = absl::Now();
  const auto plans = g.AskAll({{1, 7}, {2, 8}, {4, 7}});
  // Dead ranks are found by probes, not by waiting out the window.
  CHECK(absl::Now() - start < absl::Seconds(15));
  for (const auto& plan : plans) {
    REQUIRE(plan.ok());
    CHECK(plan->epoch == 1);
    CHECK(plan->members == std::vector<std::uint32_t>{1, 2, 4});
    CHECK(plan->round == 7);
  }
  CHECK(plans[0]->RankOf(1) == 0u);
  CHECK(plans[0]->RankOf(4) == 2u);
  CHECK_FALSE(plans[0]->RankOf(3).has_value());
}

TEST_CASE("Without a strict majority of survivors the regroup fails for everyone", "[peer][regroup]") {
  Group g(4, absl::Seconds(20));
  g.Kill(2);
  g.Kill(3);
  for (const auto& plan : g.AskAll({{0, 3}, {1, 3}})) {
    REQUIRE(plan.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(Message(plan.status()), Catch::Contains("strict majority") && Catch::Contains("ranks [0, 1]"));
  }
}

TEST_CASE("Next rounds more than one apart are refused", "[peer][regroup]") {
  Group g(3, absl::Seconds(20));
  for (const auto& plan : g.AskAll({{0, 3}, {1, 5}, {2, 4}})) {
    REQUIRE(plan.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(Message(plan.status()), Catch::Contains("span 3..5"));
  }
}

TEST_CASE("A live rank that does not ask within the window is left out, and told so later", "[peer][regroup]") {
  Group g(4, absl::Seconds(1));
  const auto plans = g.AskAll({{0, 2}, {1, 2}, {2, 2}});
  for (const auto& plan : plans) {
    REQUIRE(plan.ok());
    CHECK(plan->members == std::vector<std::uint32_t>{0, 1, 2});
  }
  const auto late = g.servers[3]->regrouper().Ask(2);
  REQUIRE(late.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(Message(late.status()), Catch::Contains("rank 3 of epoch 0 was left out"));
}

TEST_CASE("Regroup requests for another job, epoch or rank are refused", "[peer][regroup]") {
  Group g(2, absl::Seconds(1));
  v1::RegroupRequest r;
  r.set_job_id("other");
  auto plan = g.servers[0]->regrouper().Handle(r);
  CHECK(plan.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(Message(plan.status()), Catch::StartsWith("job_id"));
  r.set_job_id("regroup");
  r.set_epoch(7);
  plan = g.servers[0]->regrouper().Handle(r);
  CHECK(plan.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(Message(plan.status()), Catch::Contains("regroup of epoch 7") && Catch::Contains("in epoch 0"));
  r.set_epoch(0);
  r.set_rank(9);
  plan = g.servers[0]->regrouper().Handle(r);
  CHECK(plan.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(Message(plan.status()), Catch::StartsWith("rank: 9"));
  Regrouper unarmed;
  CHECK(unarmed.Ask(0).status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(unarmed.Arm(RegroupConfig{"x", 0, 2, {"a:1", "b:2"}, absl::Seconds(1), {}, {}}).code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("An evicted rank is left out at once although it is alive, and told it is evicted", "[peer][regroup]") {
  Group g(3, absl::Seconds(30));  // a window far longer than the test may take
  // Rank 0 sent a letter the others refused: they name it; it is alive and the lowest rank, yet
  // neither the coordinator nor a member.
  const absl::Time start = absl::Now();
  const auto plans = g.AskAll({{1, 5}, {2, 5}}, {0});
  CHECK(absl::Now() - start < absl::Seconds(10));
  for (const auto& plan : plans) {
    REQUIRE(plan.ok());
    CHECK(plan->members == std::vector<std::uint32_t>{1, 2});
    CHECK(plan->round == 5);
  }
  v1::RegroupRequest late;
  late.set_job_id("regroup");
  late.set_epoch(0);
  late.set_rank(0);
  late.set_next_round(5);
  const auto evicted = g.servers[1]->regrouper().Handle(late);
  CHECK(IsEvicted(evicted.status()));
  CHECK(DecideRegroup(0, 3, {{0, 5}, {1, 5}, {2, 5}}, {0})->members == std::vector<std::uint32_t>{1, 2});
  CHECK(DecideRegroup(0, 3, {{0, 5}, {1, 5}}, {0}).status().code() == absl::StatusCode::kFailedPrecondition);
}
