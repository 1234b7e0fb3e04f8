#include "kernels/sidco.h"

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include <catch2/catch.hpp>

#include "bench/synthetic/distributions.h"
#include "kernels/select.h"
#include "kernels/stats.h"
#include "kernels/vector_ops.h"

namespace sk = sketchps::kernels;
using sketchps::synthetic::Shape;
using sketchps::synthetic::ShapeName;
using sketchps::synthetic::SignedSamples;

namespace {

constexpr std::size_t kN = 200000;

sk::SidcoOptions Options(sk::SidcoVariant variant, double density, sk::SidcoStageMode mode, int stages) {
  sk::SidcoOptions o;
  o.variant = variant;
  o.density = density;
  o.stage_mode = mode;
  o.stages = stages;
  return o;
}

sk::SidcoEstimator Make(const sk::SidcoOptions& o) {
  auto est = sk::SidcoEstimator::Create(o);
  REQUIRE(est.ok());
  return std::move(*est);
}

// Estimates on x and returns (selected count, estimate).
std::pair<std::size_t, sk::SidcoEstimate> RunOnce(const sk::SidcoEstimator& est, const std::vector<float>& x,
                                                  sk::Scratch& scratch) {
  sk::Exec exec{nullptr, &scratch};
  sk::DeviceArray<float> d_x(x);
  auto e = est.Estimate(d_x.data(), x.size(), exec);
  REQUIRE(e.ok());
  auto count = sk::CountAbove(d_x.data(), x.size(), e->threshold, exec);
  REQUIRE(count.ok());
  return {*count, *e};
}

double Ratio(std::size_t count, double density, std::size_t n) {
  return static_cast<double>(count) / (density * static_cast<double>(n));
}

}  // namespace

namespace {

// Drives an adaptive estimator for `calls` calls on fresh samples of `shape`; returns per-call
// achieved/target and per-call M.
constexpr int kPoolSize = 7;  // distinct samples per shape, cycled through by the adaptive runs

const std::vector<std::vector<float>>& Pool(Shape shape) {
  static std::map<Shape, std::vector<std::vector<float>>> pools;
  auto& pool = pools[shape];
  if (pool.empty()) {
    for (int i = 0; i < kPoolSize; ++i) pool.push_back(SignedSamples(shape, kN, 1000 + i));
  }
  return pool;
}

struct AdaptiveRun {
  std::vector<double> ratios;
  std::vector<int> stages;
};

AdaptiveRun RunAdaptive(sk::SidcoVariant variant, Shape shape, double density, int calls, sk::Scratch& scratch) {
  auto est = Make(Options(variant, density, sk::SidcoStageMode::kAdaptive, 1));
  AdaptiveRun run;
  for (int c = 0; c < calls; ++c) {
    const auto& x = Pool(shape)[c % kPoolSize];
    run.stages.push_back(est.state().stages);
    const auto [count, e] = RunOnce(est, x, scratch);
    run.ratios.push_back(Ratio(count, density, kN));
    REQUIRE(est.Record(count, kN).ok());
  }
  return run;
}

}  // namespace

// ---- Stage ratios and options ---------------------------------------------------------------------

TEST_CASE("SidcoStageRatios multiply to the target in every mode", "[sidco]") {
  const double tail = GENERATE(0.5, 0.25, 0.01, 0.001, 3.7e-5);
  const int stages = GENERATE(0, 1, 2, 3, 7);
  auto r = sk::SidcoStageRatios(tail, 0.25, stages, 0.2);
  REQUIRE(r.ok());
  double product = 1.0;
  for (double q : *r) {
    CHECK(q > 0.0);
    CHECK(q <= 1.0);
    product *= q;
  }
  CAPTURE(tail, stages);
  CHECK(product == Approx(tail).epsilon(1e-12));
  if (stages == 1 || tail >= 0.25) {
    CHECK(r->size() == 1);
  } else if (stages >= 2) {
    REQUIRE(r->size() == static_cast<std::size_t>(stages));
    CHECK((*r)[0] == 0.25);
    for (std::size_t s = 2; s < r->size(); ++s) CHECK((*r)[s] == (*r)[1]);
  } else {  // per-stage ratio mode: 0.2 each except the last, which is in [0.2, 1)
    CHECK((*r)[0] == 0.25);
    for (std::size_t s = 1; s + 1 < r->size(); ++s) CHECK((*r)[s] == 0.2);
    CHECK(r->back() >= 0.2 - 1e-12);
    CHECK(r->back() < 1.0);
  }
}

TEST_CASE("SidcoStageRatios: exact powers and bad arguments", "[sidco]") {
  // 0.25 * 0.2^3 = 0.002: three later stages of exactly 0.2, not four.
  auto r = sk::SidcoStageRatios(0.002, 0.25, 0, 0.2);
  REQUIRE(r.ok());
  CHECK(r->size() == 4);
  CHECK(r->back() == Approx(0.2).epsilon(1e-9));
  CHECK(sk::SidcoStageRatios(0.0, 0.25, 2, 0.2).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(sk::SidcoStageRatios(0.01, 1.0, 2, 0.2).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(sk::SidcoStageRatios(0.01, 0.25, -1, 0.2).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(sk::SidcoStageRatios(0.01, 0.25, 0, 1.0).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("SidcoMaxStages is ceil(log2(1/density))", "[sidco]") {
  CHECK(sk::SidcoMaxStages(0.001) == 10);
  CHECK(sk::SidcoMaxStages(0.01) == 7);
  CHECK(sk::SidcoMaxStages(0.25) == 2);
  CHECK(sk::SidcoMaxStages(0.125) == 3);
  CHECK(sk::SidcoMaxStages(0.6) == 1);
  CHECK(sk::SidcoMaxStages(1.0) == 1);
}

TEST_CASE("SidcoOptions validation names the field", "[sidco]") {
  auto field_of = [](auto mutate) {
    sk::SidcoOptions o;
    mutate(o);
    auto s = sk::ValidateSidcoOptions(o);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(sk::SidcoEstimator::Create(o).status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  CHECK_THAT(field_of([](auto& o) { o.density = 0.0; }), Catch::Contains("density"));
  CHECK_THAT(field_of([](auto& o) { o.density = std::nan(""); }), Catch::Contains("density"));
  CHECK_THAT(field_of([](auto& o) { o.first_stage_ratio = 1.0; }), Catch::Contains("first_stage_ratio"));
  CHECK_THAT(field_of([](auto& o) { o.stages = 0; }), Catch::Contains("stages"));
  CHECK_THAT(field_of([](auto& o) { o.per_stage_ratio = 0.0; }), Catch::Contains("per_stage_ratio"));
  CHECK_THAT(field_of([](auto& o) { o.adapt_window = 0; }), Catch::Contains("adapt_window"));
  CHECK_THAT(field_of([](auto& o) { o.adapt_tolerance_up = -0.1; }), Catch::Contains("adapt_tolerance_up"));
  CHECK_THAT(field_of([](auto& o) { o.adapt_tolerance_down = 1.0; }), Catch::Contains("adapt_tolerance_down"));
  CHECK_THAT(field_of([](auto& o) { o.adapt_memory = -1; }), Catch::Contains("adapt_memory"));
  CHECK_THAT(field_of([](auto& o) { o.gamma_newton_steps = 21; }), Catch::Contains("gamma_newton_steps"));
  CHECK(sk::ValidateSidcoOptions(sk::SidcoOptions{}).ok());
}

// ---- Accuracy on synthetic data (the SIDCo paper's synthetic benchmarks) --------------------------------

TEST_CASE("Single-stage SIDCo-E hits Laplace data within 10%", "[sidco]") {
  sk::Scratch scratch;
  const double density = GENERATE(0.01, 0.001);
  const auto x = SignedSamples(Shape::kLaplace, kN, 42);
  const auto est = Make(Options(sk::SidcoVariant::kExponential, density, sk::SidcoStageMode::kFixed, 1));
  const auto [count, e] = RunOnce(est, x, scratch);
  CHECK(e.stages == 1);
  CHECK(Ratio(count, density, kN) == Approx(1.0).margin(0.1));
}

// Fixed configurations that keep achieved/target within ±25% at n = 2e5 (checked over several seeds
// with bench/sidco_table, `sketchps-sidco-table`; P and GP with M >= 3 meet it on all six cases, and so does the
// best stage count of E, which differs per distribution: that is what adaptation is for).
TEST_CASE("Fixed-stage SIDCo configurations within 25% of the target", "[sidco]") {
  using V = sk::SidcoVariant;
  struct Claim {
    Shape shape;
    double density;
    V variant;
    int stages;
  };
  std::vector<Claim> claims;
  for (Shape shape : {Shape::kLaplace, Shape::kGaussian, Shape::kStudentT3}) {
    for (double density : {0.01, 0.001}) {
      for (int m : {3, 4}) {
        claims.push_back({shape, density, V::kGeneralizedPareto, m});
        claims.push_back({shape, density, V::kGammaGeneralizedPareto, m});
      }
    }
  }
  for (int m = 1; m <= 4; ++m) claims.push_back({Shape::kLaplace, 0.001, V::kExponential, m});
  claims.push_back({Shape::kGaussian, 0.01, V::kExponential, 3});
  claims.push_back({Shape::kGaussian, 0.001, V::kExponential, 4});
  claims.push_back({Shape::kStudentT3, 0.01, V::kExponential, 2});
  claims.push_back({Shape::kStudentT3, 0.001, V::kGeneralizedPareto, 2});
  sk::Scratch scratch;
  for (const Claim& c : claims) {
    const auto x = SignedSamples(c.shape, kN, 42);
    const auto est = Make(Options(c.variant, c.density, sk::SidcoStageMode::kFixed, c.stages));
    CAPTURE(ShapeName(c.shape), c.density, sk::SidcoVariantName(c.variant), c.stages);
    CHECK(Ratio(RunOnce(est, x, scratch).first, c.density, kN) == Approx(1.0).margin(0.25));
  }
}

TEST_CASE("Single-stage exponential cannot fit Gaussian data, GP stages can", "[sidco]") {
  sk::Scratch scratch;
  const auto x = SignedSamples(Shape::kGaussian, kN, 42);
  const auto e1 = Make(Options(sk::SidcoVariant::kExponential, 0.01, sk::SidcoStageMode::kFixed, 1));
  CHECK(Ratio(RunOnce(e1, x, scratch).first, 0.01, kN) < 0.1);  // the spec's simulation: 0.02
  const auto p1 = Make(Options(sk::SidcoVariant::kGeneralizedPareto, 0.001, sk::SidcoStageMode::kFixed, 1));
  CHECK(Ratio(RunOnce(p1, x, scratch).first, 0.001, kN) > 3.0);  // single-stage GP over-selects (7x)
}

TEST_CASE("SIDCo-GP single stage on gamma magnitudes uses the exact inverse", "[sidco]") {
  sk::Scratch scratch;
  const double alpha = GENERATE(0.4, 2.0);
  auto x = sketchps::synthetic::GammaSamples(kN, alpha, 0.05, 8);
  for (std::size_t i = 0; i < x.size(); i += 2) x[i] = -x[i];
  const auto est = Make(Options(sk::SidcoVariant::kGammaGeneralizedPareto, 0.01, sk::SidcoStageMode::kFixed, 1));
  CAPTURE(alpha);
  CHECK(Ratio(RunOnce(est, x, scratch).first, 0.01, kN) == Approx(1.0).margin(0.1));
}

// Every variant, distribution and density of the table reaches ±25% within 4 windows (20 calls),
// starting from M = 1, and stays there for the following windows.
TEST_CASE("Adaptive SIDCo converges within 20 calls", "[sidco]") {
  sk::Scratch scratch;
  const auto variant = GENERATE(sk::SidcoVariant::kExponential, sk::SidcoVariant::kGeneralizedPareto,
                                sk::SidcoVariant::kGammaGeneralizedPareto);
  const Shape shape = GENERATE(Shape::kLaplace, Shape::kGaussian, Shape::kStudentT3);
  const double density = GENERATE(0.01, 0.001);
  constexpr int kConverged = 20, kCalls = 35;
  const auto run = RunAdaptive(variant, shape, density, kCalls, scratch);
  CAPTURE(sk::SidcoVariantName(variant), ShapeName(shape), density);
  for (int w = kConverged; w + 5 <= kCalls; w += 5) {
    double mean = 0.0;
    for (int i = 0; i < 5; ++i) mean += run.ratios[w + i] / 5.0;
    CAPTURE(w, run.stages[w]);
    CHECK(mean == Approx(1.0).margin(0.25));
  }
}

TEST_CASE("SIDCo selection is invariant to scaling x", "[sidco]") {
  sk::Scratch scratch;
  sk::Exec exec{nullptr, &scratch};
  const auto variant = GENERATE(sk::SidcoVariant::kExponential, sk::SidcoVariant::kGeneralizedPareto,
                                sk::SidcoVariant::kGammaGeneralizedPareto);
  const float c = GENERATE(0.0009765625f, 1e-3f, 37.5f);
  const auto x = SignedSamples(Shape::kStudentT3, kN, 3);
  std::vector<float> y(x);
  for (auto& v : y) v *= c;
  const auto est = Make(Options(variant, 0.001, sk::SidcoStageMode::kFixed, 3));
  auto select = [&](const std::vector<float>& v) {
    sk::DeviceArray<float> d_v(v);
    auto e = est.Estimate(d_v.data(), v.size(), exec);
    REQUIRE(e.ok());
    sk::DeviceArray<std::uint32_t> idx(v.size());
    sk::DeviceArray<float> val(v.size());
    auto count = sk::ThresholdSelect(d_v.data(), v.size(), e->threshold, v.size(), idx.data(), val.data(), exec);
    REQUIRE(count.ok());
    return idx.ToHost(*count);
  };
  const auto a = select(x), b = select(y);
  CAPTURE(sk::SidcoVariantName(variant), c);
  CHECK(a.size() > 100);
  CHECK(a == b);
}

TEST_CASE("SIDCo Estimate edge cases", "[sidco]") {
  sk::Scratch scratch;
  sk::Exec exec{nullptr, &scratch};
  const auto est = Make(Options(sk::SidcoVariant::kGeneralizedPareto, 0.01, sk::SidcoStageMode::kFixed, 3));
  SECTION("all zeros: nothing is selected") {
    sk::DeviceArray<float> d(std::vector<float>(1000, 0.0f));
    auto e = est.Estimate(d.data(), 1000, exec);
    REQUIRE(e.ok());
    CHECK(e->nonzeros == 0);
    CHECK(*sk::CountAbove(d.data(), 1000, e->threshold, exec) == 0);
  }
  SECTION("fewer nonzeros than the target: every nonzero is selected") {
    std::vector<float> x(10000, 0.0f);
    x[5] = 1.0f;
    x[77] = -0.25f;
    sk::DeviceArray<float> d(x);
    auto e = est.Estimate(d.data(), x.size(), exec);
    REQUIRE(e.ok());
    CHECK(e->threshold == 0.0f);
    CHECK(*sk::CountAbove(d.data(), x.size(), e->threshold, exec) == 2);
  }
  SECTION("constant magnitudes fall back to the exponential fit") {
    sk::DeviceArray<float> d(std::vector<float>(1000, 2.0f));
    auto e = est.Estimate(d.data(), 1000, exec);
    REQUIRE(e.ok());
    CHECK(*sk::CountAbove(d.data(), 1000, e->threshold, exec) == 0);
  }
  SECTION("mostly zeros: the target counts against n, the fit uses the nonzeros") {
    auto x = SignedSamples(Shape::kLaplace, kN, 9);
    for (std::size_t i = 0; i < x.size(); ++i)
      if (i % 4 != 0) x[i] = 0.0f;
    const auto e1 = Make(Options(sk::SidcoVariant::kExponential, 0.01, sk::SidcoStageMode::kFixed, 1));
    CHECK(Ratio(RunOnce(e1, x, scratch).first, 0.01, kN) == Approx(1.0).margin(0.1));
  }
  SECTION("non-finite input and bad arguments are errors") {
    std::vector<float> x(100, 1.0f);
    x[50] = std::numeric_limits<float>::infinity();
    sk::DeviceArray<float> d(x);
    auto e = est.Estimate(d.data(), x.size(), exec);
    CHECK(e.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(e.status().message()), Catch::Contains("NaN or Inf"));
    CHECK(est.Estimate(nullptr, 10, exec).status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(est.Estimate(d.data(), 10, sk::Exec{}).status().code() == absl::StatusCode::kInvalidArgument);
    auto empty = est.Estimate(nullptr, 0, exec);
    REQUIRE(empty.ok());
    CHECK(empty->stages == 0);
  }
}
