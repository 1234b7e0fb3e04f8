#include "common/distribution_fit.h"

#include <cmath>
#include <limits>
#include <string>

#include <boost/math/special_functions/gamma.hpp>
#include <catch2/catch.hpp>

#include "bench/synthetic/distributions.h"

using namespace sketchps;

namespace {

// Naive moments of a host sample (every value included, unshifted).
SampleMoments Moments(const std::vector<float>& y, double scale = 1.0) {
  SampleMoments m;
  for (float v : y) {
    const double z = static_cast<double>(v) * scale;
    ++m.count;
    m.sum += z;
    m.sum_sq += z * z;
    m.sum_log += std::log(z);
    m.min = std::min(m.min, z);
    m.max = std::max(m.max, z);
  }
  return m;
}

double EmpiricalTail(const std::vector<float>& y, double t) {
  std::size_t above = 0;
  for (float v : y) above += v > t;
  return static_cast<double>(above) / static_cast<double>(y.size());
}

bool MessageHas(const absl::Status& s, const std::string& word) {
  return std::string(s.message()).find(word) != std::string::npos;
}

}  // namespace

TEST_CASE("Exponential fit recovers the scale and its threshold hits the tail", "[distribution_fit]") {
  const double scale = GENERATE(0.003, 2.5);
  const auto y = synthetic::ExponentialSamples(200000, scale, 1);
  auto fit = FitExponential(Moments(y));
  REQUIRE(fit.ok());
  CHECK(fit->scale == Approx(scale).epsilon(0.01));
  for (double q : {0.1, 0.01, 0.001}) {
    auto t = ExponentialTailThreshold(*fit, q);
    REQUIRE(t.ok());
    CHECK(ExponentialTail(*fit, *t) == Approx(q).epsilon(1e-12));
    CHECK(EmpiricalTail(y, *t) == Approx(q).epsilon(q >= 0.01 ? 0.05 : 0.15));
  }
}

TEST_CASE("Generalized Pareto method of moments recovers shape and scale", "[distribution_fit]") {
  const double xi = GENERATE(-0.2, 0.0, 0.15);
  const double sigma = 1.5;
  const auto y = synthetic::GeneralizedParetoSamples(400000, xi, sigma, 2);
  auto fit = FitGeneralizedPareto(Moments(y));
  REQUIRE(fit.ok());
  CAPTURE(xi);
  CHECK(fit->shape == Approx(xi).margin(0.03));
  CHECK(fit->scale == Approx(sigma).epsilon(0.03));
  for (double q : {0.05, 0.001}) {
    auto t = GeneralizedParetoTailThreshold(*fit, q);
    REQUIRE(t.ok());
    CHECK(GeneralizedParetoTail(*fit, *t) == Approx(q).epsilon(1e-10));
    CHECK(EmpiricalTail(y, *t) == Approx(q).epsilon(0.2));
  }
}

TEST_CASE("Generalized Pareto threshold is continuous at shape 0", "[distribution_fit]") {
  const double q = 0.003;
  const double exp_t = *ExponentialTailThreshold(ExponentialFit{2.0}, q);
  for (double xi : {1e-13, -1e-13, 1e-9, -1e-9}) {
    CAPTURE(xi);
    CHECK(*GeneralizedParetoTailThreshold(GeneralizedParetoFit{xi, 2.0}, q) == Approx(exp_t).epsilon(1e-7));
  }
  // Bounded support (ξ < 0): the tail is 0 beyond σ / |ξ|.
  CHECK(GeneralizedParetoTail(GeneralizedParetoFit{-0.5, 1.0}, 2.5) == 0.0);
}

TEST_CASE("Gamma shape estimate is within 2% (closed form and Newton-refined MLE)", "[distribution_fit]") {
  const double alpha = GENERATE(0.3, 1.0, 2.0);
  const int steps = GENERATE(0, 3);
  const auto y = synthetic::GammaSamples(200000, alpha, 0.01, 3);
  auto fit = FitGamma(Moments(y), steps);
  REQUIRE(fit.ok());
  CAPTURE(alpha, steps);
  CHECK(fit->shape == Approx(alpha).epsilon(0.02));
  CHECK(fit->shape * fit->scale == Approx(Moments(y).Mean()).epsilon(1e-12));
}

TEST_CASE("Newton refinement solves the gamma MLE equation exactly", "[distribution_fit]") {
  for (double s : {0.05, 0.3, 1.0, 2.5}) {  // s = ln(mean) - mean(ln y)
    SampleMoments m;
    m.count = 1;
    m.sum = 1.0;
    m.sum_log = -s;
    auto fit = FitGamma(m, 4);
    REQUIRE(fit.ok());
    CAPTURE(s);
    CHECK(std::log(fit->shape) - boost::math::digamma(fit->shape) == Approx(s).epsilon(1e-10));
    CHECK(*GammaShapeApproximation(s) == Approx(fit->shape).epsilon(0.02));
  }
}

TEST_CASE("Gamma threshold uses the exact inverse incomplete gamma", "[distribution_fit]") {
  const double alpha = GENERATE(0.3, 0.5, 1.0, 2.0, 7.5);
  for (double q : {0.25, 0.01, 0.001, 1e-6}) {
    const GammaFit fit{alpha, 0.7};
    auto t = GammaTailThreshold(fit, q);
    REQUIRE(t.ok());
    CAPTURE(alpha, q);
    CHECK(boost::math::gamma_q(alpha, *t / 0.7) == Approx(q).epsilon(1e-9));
    CHECK(GammaTail(fit, *t) == Approx(q).epsilon(1e-9));
  }
  // On real samples the fitted threshold selects about q of them.
  const auto y = synthetic::GammaSamples(300000, alpha, 2.0, 4);
  auto fit = FitGamma(Moments(y));
  REQUIRE(fit.ok());
  const double t = *GammaTailThreshold(*fit, 0.01);
  CHECK(EmpiricalTail(y, t) == Approx(0.01).epsilon(0.1));
}

TEST_CASE("Fits are scale-equivariant", "[distribution_fit]") {
  const auto y = synthetic::GammaSamples(50000, 0.6, 1.0, 5);
  const double c = 1e-5;
  const auto a = Moments(y), b = Moments(y, c);
  CHECK(FitExponential(b)->scale == Approx(FitExponential(a)->scale * c).epsilon(1e-12));
  CHECK(FitGeneralizedPareto(b)->shape == Approx(FitGeneralizedPareto(a)->shape).epsilon(1e-9));
  CHECK(FitGeneralizedPareto(b)->scale == Approx(FitGeneralizedPareto(a)->scale * c).epsilon(1e-9));
  CHECK(FitGamma(b)->shape == Approx(FitGamma(a)->shape).epsilon(1e-9));
  CHECK(*GammaTailThreshold(*FitGamma(b), 0.01) == Approx(*GammaTailThreshold(*FitGamma(a), 0.01) * c).epsilon(1e-9));
}

TEST_CASE("ShiftMoments equals the moments of the shifted sample", "[distribution_fit]") {
  const std::vector<float> y = {3.0f, 3.5f, 4.25f, 10.0f};
  const auto m = ShiftMoments(Moments(y), 3.0);
  std::vector<float> shifted;
  for (float v : y) shifted.push_back(v - 3.0f);
  auto want = Moments(shifted);
  CHECK(m.count == 4);
  CHECK(m.sum == Approx(want.sum));
  CHECK(m.sum_sq == Approx(want.sum_sq));
  CHECK(m.min == 0.0);
  CHECK(m.max == 7.0);
  CHECK(std::isnan(m.sum_log));
  CHECK(m.Variance() == Approx(Moments(y).Variance()));
}

TEST_CASE("Fits and thresholds reject bad input with a message naming it", "[distribution_fit]") {
  SampleMoments empty;
  auto e = FitExponential(empty);
  CHECK(e.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(MessageHas(e.status(), "count"));
  SampleMoments nan_sum;
  nan_sum.count = 10;
  nan_sum.sum = std::numeric_limits<double>::quiet_NaN();
  CHECK(MessageHas(FitGeneralizedPareto(nan_sum).status(), "sum"));
  CHECK(MessageHas(FitGamma(nan_sum).status(), "sum"));
  SampleMoments constant = Moments({2.0f, 2.0f, 2.0f});
  CHECK(MessageHas(FitGeneralizedPareto(constant).status(), "variance"));
  CHECK(FitGamma(constant).status().code() == absl::StatusCode::kInvalidArgument);  // s == 0
  SampleMoments no_log = Moments({1.0f, 2.0f});
  no_log.sum_log = std::numeric_limits<double>::quiet_NaN();
  CHECK(MessageHas(FitGamma(no_log).status(), "sum_log"));
  CHECK(MessageHas(FitGamma(Moments({1.0f, 2.0f}), -1).status(), "newton_steps"));
  for (double q : {0.0, -0.5, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    CHECK(MessageHas(ExponentialTailThreshold(ExponentialFit{1.0}, q).status(), "q ="));
    CHECK(MessageHas(GeneralizedParetoTailThreshold(GeneralizedParetoFit{0.1, 1.0}, q).status(), "q ="));
    CHECK(MessageHas(GammaTailThreshold(GammaFit{1.0, 1.0}, q).status(), "q ="));
  }
  CHECK(MessageHas(ExponentialTailThreshold(ExponentialFit{0.0}, 0.1).status(), "scale"));
  CHECK(MessageHas(GammaTailThreshold(GammaFit{-1.0, 1.0}, 0.1).status(), "shape"));
  CHECK(*ExponentialTailThreshold(ExponentialFit{3.0}, 1.0) == 0.0);  // q = 1 keeps everything
}
