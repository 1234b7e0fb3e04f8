// SIDCo stage-count adaptation (kernels/sidco.h, SidcoAdaptState), driven by scripted achieved
// densities: no data, only Record() feedback.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/sidco.h"

namespace sk = sketchps::kernels;

namespace {

sk::SidcoEstimator Make(const sk::SidcoOptions& o) {
  auto est = sk::SidcoEstimator::Create(o);
  REQUIRE(est.ok());
  return std::move(*est);
}

sk::SidcoOptions Options(double density, sk::SidcoStageMode mode, int stages) {
  sk::SidcoOptions o;
  o.density = density;
  o.stage_mode = mode;
  o.stages = stages;
  return o;
}

}  // namespace

namespace {

// Feeds `windows` windows of Q = 5 calls whose achieved/target ratio is ratio_of(M); returns M after
// each window.
template <class RatioOf>
std::vector<int> Script(sk::SidcoEstimator& est, RatioOf ratio_of, int windows) {
  constexpr std::size_t n = 1000000;
  std::vector<int> trace;
  for (int w = 0; w < windows; ++w) {
    const double ratio = ratio_of(est.state().stages);
    const auto count = static_cast<std::size_t>(std::llround(ratio * est.options().density * n));
    for (int i = 0; i < 5; ++i) REQUIRE(est.Record(count, n).ok());
    trace.push_back(est.state().stages);
  }
  return trace;
}

sk::SidcoEstimator Adaptive(double density) { return Make(Options(density, sk::SidcoStageMode::kAdaptive, 1)); }

}  // namespace

TEST_CASE("Adaptation on light-tailed feedback adds stages until the target is met", "[sidco]") {
  auto est = Adaptive(0.01);
  const std::map<int, double> gaussian = {{1, 0.02}, {2, 0.64}, {3, 1.13}, {4, 1.31}, {5, 1.4}};
  CHECK(Script(
            est, [&](int m) { return gaussian.at(m); }, 5) == std::vector<int>{2, 3, 3, 3, 3});
  CHECK(est.state().direction == 1);
}

TEST_CASE("Adaptation on heavy-tailed feedback does not stick at M = 1", "[sidco]") {
  auto est = Adaptive(0.001);
  // Student-t3 with the exponential fit: more stages select FEWER entries. The
  // reference's mode -1 would keep asking for M - 1 at M = 1 forever.
  const std::map<int, double> t3 = {{1, 4.53}, {2, 3.44}, {3, 1.23}, {4, 0.71}, {5, 0.5}};
  const auto trace = Script(
      est, [&](int m) { return t3.at(m); }, 8);
  CHECK(trace == std::vector<int>{2, 3, 4, 3, 3, 3, 3, 3});
  CHECK(est.state().direction == -1);
}

TEST_CASE("Adaptation searches both sides when the count is not monotone in M", "[sidco]") {
  auto est = Adaptive(0.001);
  const std::map<int, double> gp_gaussian = {{1, 0.01}, {2, 1.45}, {3, 1.02}, {4, 1.06}};
  CHECK(Script(
            est, [&](int m) { return gp_gaussian.at(m); }, 4) == std::vector<int>{2, 3, 3, 3});
}

TEST_CASE("Adaptation clamps M to 1 .. ceil(log2(1/density))", "[sidco]") {
  SECTION("always too few: climbs to the upper clamp and stays") {
    auto est = Adaptive(0.01);
    CHECK(Script(
              est, [](int) { return 0.1; }, 9) == std::vector<int>{2, 3, 4, 5, 6, 7, 7, 7, 7});
  }
  SECTION("always too many: never below 1 nor above the clamp") {
    auto est = Adaptive(0.01);
    for (int m : Script(
             est, [](int) { return 5.0; }, 30)) {
      CHECK(m >= 1);
      CHECK(m <= 7);
    }
  }
  SECTION("an initial M beyond the clamp is clamped") {
    auto est = Make(Options(0.01, sk::SidcoStageMode::kAdaptive, 40));
    CHECK(est.state().stages == 7);
  }
}

TEST_CASE("Adaptation acts only at window ends and only outside the tolerance", "[sidco]") {
  auto est = Adaptive(0.01);
  constexpr std::size_t n = 100000;  // target count 1000
  for (int i = 0; i < 4; ++i) REQUIRE(est.Record(100, n).ok());
  CHECK(est.state().stages == 1);
  CHECK(est.state().window_calls == 4);
  REQUIRE(est.Record(100, n).ok());
  CHECK(est.state().stages == 2);
  CHECK(est.state().window_calls == 0);
  CHECK(est.state().windows == 1);
  for (int i = 0; i < 5; ++i) REQUIRE(est.Record(1190, n).ok());  // 1.19: inside 1 + 0.2
  CHECK(est.state().stages == 2);
  for (int i = 0; i < 5; ++i) REQUIRE(est.Record(810, n).ok());  // 0.81: inside 1 - 0.2
  CHECK(est.state().stages == 2);
  for (int i = 0; i < 5; ++i) REQUIRE(est.Record(1210, n).ok());  // 1.21: too many
  CHECK(est.state().stages != 2);
  CHECK(est.Record(5, 0).code() == absl::StatusCode::kInvalidArgument);
  CHECK(est.Record(11, 10).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Fixed-stage estimators ignore feedback", "[sidco]") {
  auto est = Make(Options(0.01, sk::SidcoStageMode::kFixed, 2));
  for (int i = 0; i < 20; ++i) REQUIRE(est.Record(1, 1000).ok());
  CHECK(est.state().windows == 0);
}

TEST_CASE("SIDCo adaptation state round-trips through SetState and is validated", "[sidco]") {
  auto est = Adaptive(0.001);
  Script(
      est, [](int m) { return m < 3 ? 0.3 : 1.0; }, 3);
  const sk::SidcoAdaptState saved = est.state();
  auto restored = Adaptive(0.001);
  REQUIRE(restored.SetState(saved).ok());
  CHECK(restored.state().stages == saved.stages);
  // Both continue identically.
  auto next = [](int m) { return m == 3 ? 1.5 : 0.9; };
  CHECK(Script(est, next, 3) == Script(restored, next, 3));

  auto bad = [&](auto mutate) {
    sk::SidcoAdaptState s = saved;
    mutate(s);
    auto status = restored.SetState(s);
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    return std::string(status.message());
  };
  CHECK_THAT(bad([](auto& s) { s.stages = 11; }), Catch::Contains("stages"));
  CHECK_THAT(bad([](auto& s) { s.direction = 0; }), Catch::Contains("direction"));
  CHECK_THAT(bad([](auto& s) { s.window_calls = 5; }), Catch::Contains("window_calls"));
  CHECK_THAT(bad([](auto& s) { s.error_by_stages.pop_back(); }), Catch::Contains("error_by_stages"));
}
