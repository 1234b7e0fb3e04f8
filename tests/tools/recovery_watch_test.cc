// The recovery watch against residual trajectories whose window means are known in closed form.
#include "tools/recovery_watch.h"

#include <cmath>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "tools/summary.h"

using namespace sketchps::tools;

namespace {

// `rounds` records of one rank whose residual norm at round t is norm(t); NaN writes null, as JSON does.
std::vector<nlohmann::json> Records(int rounds, const std::function<double(int)>& norm) {
  std::vector<nlohmann::json> out;
  for (int t = 0; t < rounds; ++t) {
    const double v = norm(t);
    nlohmann::json r{{"round", t},         {"bytes_up", 100.0},     {"bytes_down", 100.0},
                     {"payload_up", 90.0}, {"payload_down", 90.0},  {"compute_s", 0.1},
                     {"compress_s", 0.01}, {"communicate_s", 0.05}, {"dense_bytes", 4000.0}};
    r["residual_norm"] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

TEST_CASE("A residual that keeps growing is reported with both windows' means", "[recovery_watch]") {
  // norm = t + 1 over 100 rounds: the middle window is rounds 40-49 (mean 45.5), the end 90-99 (95.5).
  const auto growth = FindResidualGrowth({Records(100, [](int t) { return t + 1.0; })});
  REQUIRE(growth);
  CHECK(growth->rank == 0);
  CHECK(growth->middle_first == 40);
  CHECK(growth->middle_last == 49);
  CHECK(growth->end_first == 90);
  CHECK(growth->end_last == 99);
  CHECK(growth->middle_norm == Approx(45.5));
  CHECK(growth->end_norm == Approx(95.5));
  CHECK(growth->ratio() == Approx(95.5 / 45.5));
  const std::string message = DescribeResidualGrowth(*growth);
  CHECK_THAT(message, Catch::Contains("worker 0's residual norm grew from 45.5 (mean of rounds 40-49) to 95.5 "
                                      "(rounds 90-99)"));
  CHECK_THAT(message, Catch::Contains("scheme.density"));
}

TEST_CASE("A residual that levels off or falls is not reported", "[recovery_watch]") {
  CHECK_FALSE(FindResidualGrowth({Records(100, [](int t) { return std::min(t, 30) + 1.0; })}));
  CHECK_FALSE(FindResidualGrowth({Records(100, [](int t) { return t < 40 ? 60.0 : 60.0 - 0.5 * (t - 40); })}));
  // Growth up to the limit is tolerated: 1.4x between the windows.
  CHECK_FALSE(FindResidualGrowth({Records(100, [](int t) { return t < 50 ? 10.0 : 14.0; })}));
  CHECK(FindResidualGrowth({Records(100, [](int t) { return t < 50 ? 10.0 : 16.0; })}));
}

TEST_CASE("A non-finite residual in the second half is reported as such", "[recovery_watch]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto growth = FindResidualGrowth({Records(100, [&](int t) { return t == 70 ? nan : 5.0; })});
  REQUIRE(growth);
  CHECK(std::isinf(growth->end_norm));
  CHECK_THAT(DescribeResidualGrowth(*growth), Catch::Contains("to a non-finite value"));
  const nlohmann::json j = ResidualGrowthJson(growth);
  CHECK(j["end_norm"].is_null());
  CHECK(j["ratio"].is_null());
  CHECK(j["middle_norm"] == 5.0);
}

TEST_CASE("The watch names the rank that grew most and ignores runs without residuals", "[recovery_watch]") {
  const auto level = Records(100, [](int) { return 3.0; });
  const auto doubles = Records(100, [](int t) { return t < 50 ? 1.0 : 2.0; });
  const auto triples = Records(100, [](int t) { return t < 50 ? 1.0 : 3.0; });
  const auto growth = FindResidualGrowth({level, doubles, triples});
  REQUIRE(growth);
  CHECK(growth->rank == 2);
  CHECK(growth->ratio() == Approx(3.0));

  // Too few rounds for a verdict, and records without the key (dense): nothing.
  CHECK_FALSE(FindResidualGrowth({Records(kMinWatchedRounds - 1, [](int t) { return std::exp(t); })}));
  std::vector<nlohmann::json> dense = level;
  for (auto& r : dense) r.erase("residual_norm");
  CHECK_FALSE(FindResidualGrowth({dense}));
  CHECK(ResidualGrowthJson(std::nullopt).is_null());
}

TEST_CASE("summary.json carries the watch's verdict", "[recovery_watch]") {
  RunFacts facts;
  facts.scheme = "gs_sgd";
  facts.workers = 2;
  facts.rounds_per_epoch = 100;
  const auto healthy = Summarize(facts, {Records(100, [](int) { return 3.0; }), Records(100, [](int) { return 3.0; })});
  REQUIRE(healthy.ok());
  CHECK((*healthy)["residual_growth"].is_null());
  const auto diverging =
      Summarize(facts, {Records(100, [](int) { return 3.0; }), Records(100, [](int t) { return t + 1.0; })});
  REQUIRE(diverging.ok());
  CHECK((*diverging)["residual_growth"]["rank"] == 1);
  CHECK_THAT((*diverging)["residual_growth"]["message"].get<std::string>(), Catch::Contains("worker 1's"));
}

TEST_CASE("The recovery watch reports the first worker whose round records say the recovery floor was not held",
          "[tools][recovery_watch]") {
  using sketchps::tools::FindFloorNotHeld;
  const auto held = Records(30, [](int) { return 3.0; });
  CHECK_FALSE(FindFloorNotHeld({held, held}).has_value());
  auto late = held;
  late[20]["floor_not_held"] = 2;  // round 20, on two shards
  late[20]["floor_growth"] = 2.5;
  late[29]["floor_not_held"] = 1;
  const auto f = FindFloorNotHeld({held, late});
  REQUIRE(f.has_value());
  CHECK(f->rank == 1);
  CHECK(f->round == 20);
  CHECK(f->shards == 2);
  CHECK(f->growth == 2.5);
  CHECK(f->lines == 3);
  const auto json = sketchps::tools::FloorNotHeldJson(f, "gs_sgd");
  CHECK(json["rank"] == 1);
  CHECK(json["lines"] == 3);
  CHECK_THAT(json["message"].get<std::string>(),
             Catch::StartsWith("worker 1: recovery floor not held: gs_sgd, round 20 (2 shard(s); 3 time(s) in all)"));
  CHECK_THAT(json["message"].get<std::string>(), Catch::Contains("scheme.gs_sgd.budget_factor"));
  CHECK(sketchps::tools::FloorNotHeldJson(std::nullopt, "gs_sgd").is_null());
}

TEST_CASE("The summary states the recovery floor not held from the records, not from the logs",
          "[tools][recovery_watch]") {
  RunFacts facts;
  facts.scheme = "sketched_sgd";
  facts.workers = 2;
  facts.rounds_per_epoch = 100;
  auto records = Records(30, [](int) { return 3.0; });
  const auto held = Summarize(facts, {records, records});
  REQUIRE(held.ok());
  CHECK((*held)["recovery_floor"].is_null());
  records[10]["floor_not_held"] = 1;
  records[10]["floor_growth"] = 1.9;
  const auto not_held = Summarize(facts, {records, records});
  REQUIRE(not_held.ok());
  CHECK((*not_held)["recovery_floor"]["rank"] == 0);
  CHECK_THAT((*not_held)["recovery_floor"]["message"].get<std::string>(),
             Catch::Contains("recovery floor not held: sketched_sgd") && Catch::Contains("1.90x"));
}
