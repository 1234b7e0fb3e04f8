#include "kernels/sdagc.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include <catch2/catch.hpp>

#include "bench/synthetic/distributions.h"
#include "kernels/select.h"
#include "kernels/vector_ops.h"

namespace sk = sketchps::kernels;
using sketchps::synthetic::Shape;
using sketchps::synthetic::SignedSamples;

namespace {

// Gaussian layers of the given sizes, layer l scaled by scales[l]; returns the flat vector and table.
std::pair<std::vector<float>, std::vector<sk::Segment>> GaussianLayers(const std::vector<std::size_t>& sizes,
                                                                       const std::vector<float>& scales,
                                                                       std::uint64_t seed,
                                                                       Shape shape = Shape::kGaussian) {
  std::vector<float> x;
  std::vector<sk::Segment> layers;
  for (std::size_t l = 0; l < sizes.size(); ++l) {
    layers.push_back({x.size(), sizes[l]});
    for (float v : SignedSamples(shape, sizes[l], seed + l)) x.push_back(v * scales[l]);
  }
  return {x, layers};
}

// Selected count per layer at thresholds tau (naive host filter).
std::vector<std::size_t> CountPerLayer(const std::vector<float>& x, const std::vector<sk::Segment>& layers,
                                       const std::vector<float>& tau) {
  std::vector<std::size_t> counts;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    std::size_t c = 0;
    for (std::size_t i = layers[l].offset; i < layers[l].offset + layers[l].size; ++i) c += std::fabs(x[i]) > tau[l];
    counts.push_back(c);
  }
  return counts;
}

std::vector<float> Thresholds(const std::vector<float>& x, const std::vector<sk::Segment>& layers, double lambda) {
  sk::Scratch scratch;
  sk::DeviceArray<float> d_x(x);
  auto tau = sk::SdagcThresholds(d_x.data(), x.size(), layers, lambda, sk::Exec{nullptr, &scratch});
  REQUIRE(tau.ok());
  return *tau;
}

}  // namespace

TEST_CASE("SDAGC thresholds are lambda times the layer standard deviation", "[sdagc]") {
  const auto [x, layers] = GaussianLayers({1000, 1, 30000, 0, 4097}, {2.0f, 1.0f, 1e-3f, 1.0f, 50.0f}, 1);
  const auto tau = Thresholds(x, layers, 2.5);
  REQUIRE(tau.size() == layers.size());
  for (std::size_t l = 0; l < layers.size(); ++l) {
    double sum = 0.0, sq = 0.0;
    const auto& s = layers[l];
    for (std::size_t i = s.offset; i < s.offset + s.size; ++i) sum += x[i];
    const double mean = s.size ? sum / s.size : 0.0;
    for (std::size_t i = s.offset; i < s.offset + s.size; ++i) sq += (x[i] - mean) * (x[i] - mean);
    const double sd = s.size ? std::sqrt(sq / s.size) : 0.0;
    CAPTURE(l);
    CHECK(tau[l] == Approx(2.5 * sd).epsilon(1e-6).margin(1e-30));
  }
  CHECK(tau[1] == 0.0f);  // one entry: zero spread
  CHECK(tau[3] == 0.0f);  // empty layer
}

TEST_CASE("SDAGC selected fraction on Gaussian layers equals erfc(lambda / sqrt 2)", "[sdagc]") {
  const double lambda = GENERATE(1.0, 2.0, 2.5, sk::kSdagcDefaultLambdaFinal);
  const std::vector<std::size_t> sizes = {1000000, 400000, 600000};
  const auto [x, layers] = GaussianLayers(sizes, {1e-4f, 1.0f, 30.0f}, 7);
  const auto counts = CountPerLayer(x, layers, Thresholds(x, layers, lambda));
  const double p = std::erfc(lambda / std::sqrt(2.0));
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const double expected = p * static_cast<double>(sizes[l]);
    // Binomial noise (4 sd) plus 2% for the estimated sigma.
    const double tolerance = 4.0 * std::sqrt(expected * (1.0 - p)) + 0.02 * expected;
    CAPTURE(lambda, l, expected, counts[l]);
    CHECK(std::fabs(static_cast<double>(counts[l]) - expected) <= tolerance);
  }
}

TEST_CASE("SDAGC default lambda gives at least 400x compression on Gaussian layers", "[sdagc]") {
  CHECK(std::erfc(sk::kSdagcDefaultLambdaFinal / std::sqrt(2.0)) <= 0.0025);
  CHECK(sk::SdagcSchedule{}.lambda_final == sk::kSdagcDefaultLambdaFinal);
  const auto [x, layers] = GaussianLayers({2000000}, {0.01f}, 3);
  const auto counts = CountPerLayer(x, layers, Thresholds(x, layers, sk::SdagcLambda(sk::SdagcSchedule{}, 10.0)));
  CHECK(static_cast<double>(counts[0]) / x.size() <= 0.0025);
}

TEST_CASE("SDAGC thresholds scale with the layer and the selection does not change", "[sdagc]") {
  const auto [x, layers] = GaussianLayers({50000, 70000}, {1.0f, 3.0f}, 11, Shape::kStudentT3);
  std::vector<float> y(x);
  for (std::size_t i = layers[1].offset; i < y.size(); ++i) y[i] *= 0.125f;  // exact power of two
  const auto tx = Thresholds(x, layers, 3.0), ty = Thresholds(y, layers, 3.0);
  CHECK(ty[0] == tx[0]);
  CHECK(ty[1] == Approx(tx[1] * 0.125).epsilon(1e-7));
  CHECK(CountPerLayer(x, layers, tx) == CountPerLayer(y, layers, ty));
}

TEST_CASE("SDAGC lambda warm-up schedule", "[sdagc]") {
  const sk::SdagcSchedule s;  // 1.0 -> 3.09 over 4 units of t
  CHECK(sk::SdagcLambda(s, 0.0) == 1.0);
  CHECK(sk::SdagcLambda(s, -3.0) == 1.0);
  CHECK(sk::SdagcLambda(s, 2.0) == Approx((1.0 + 3.09) / 2));
  CHECK(sk::SdagcLambda(s, 4.0) == 3.09);
  CHECK(sk::SdagcLambda(s, 100.0) == 3.09);
  double previous = 0.0;
  for (double e = 0.0; e <= 5.0; e += 0.25) {
    CHECK(sk::SdagcLambda(s, e) >= previous);
    previous = sk::SdagcLambda(s, e);
  }
  CHECK(sk::SdagcLambda(sk::SdagcSchedule{1.0, 4.0, 0.0}, 0.0) == 4.0);  // no warm-up
  auto field = [](sk::SdagcSchedule bad) { return std::string(sk::ValidateSdagcSchedule(bad).message()); };
  CHECK_THAT(field({0.0, 3.0, 4.0}), Catch::Contains("lambda_initial"));
  CHECK_THAT(field({1.0, std::nan(""), 4.0}), Catch::Contains("lambda_final"));
  CHECK_THAT(field({1.0, 3.0, -1.0}), Catch::Contains("SdagcSchedule.warmup"));
  CHECK(sk::ValidateSdagcSchedule(s).ok());
}

TEST_CASE("SDAGC closed loop reaches the target density on heavy-tailed layers", "[sdagc]") {
  const auto [x, layers] = GaussianLayers({300000, 200000}, {1.0f, 0.01f}, 5, Shape::kLaplace);
  sk::SdagcControllerOptions o;
  o.target_density = 0.002;
  auto controller = sk::SdagcLambdaController::Create(o, sk::kSdagcDefaultLambdaFinal);
  REQUIRE(controller.ok());
  double density = 0.0;
  for (int step = 0; step < 12; ++step) {
    const auto counts = CountPerLayer(x, layers, Thresholds(x, layers, controller->lambda()));
    const std::size_t selected = counts[0] + counts[1];
    density = static_cast<double>(selected) / x.size();
    REQUIRE(controller->Record(selected, x.size()).ok());
  }
  CHECK(density == Approx(0.002).epsilon(0.1));
  CHECK(controller->lambda() > 4.0);  // Laplace needs about ln(1/0.002)/√2 = 4.4
}

TEST_CASE("SDAGC controller and thresholds validate their input", "[sdagc]") {
  sk::SdagcControllerOptions o;
  o.gain = 0.0;
  CHECK_THAT(std::string(sk::SdagcLambdaController::Create(o, 3.0).status().message()), Catch::Contains("gain"));
  o = {};
  o.target_density = 1.5;
  CHECK_THAT(std::string(sk::SdagcLambdaController::Create(o, 3.0).status().message()),
             Catch::Contains("target_density"));
  o = {};
  CHECK(sk::SdagcLambdaController::Create(o, 100.0).status().code() == absl::StatusCode::kInvalidArgument);
  auto c = sk::SdagcLambdaController::Create(o, 3.0);
  REQUIRE(c.ok());
  CHECK(c->Record(1, 0).code() == absl::StatusCode::kInvalidArgument);
  CHECK(c->Record(5, 4).code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(c->Record(0, 1000000).ok());  // nothing selected: λ drops, stays finite
  CHECK(c->lambda() < 3.0);
  CHECK(c->lambda() >= o.min_lambda);

  sk::Scratch scratch;
  sk::Exec exec{nullptr, &scratch};
  std::vector<float> x(100, 1.0f);
  x[30] = std::numeric_limits<float>::quiet_NaN();
  sk::DeviceArray<float> d_x(x);
  auto nan = sk::SdagcThresholds(d_x.data(), x.size(), {{0, 10}, {20, 50}}, 3.0, exec);
  CHECK_THAT(std::string(nan.status().message()), Catch::Contains("layers[1]"));
  CHECK(sk::SdagcThresholds(d_x.data(), x.size(), {{0, 10}}, 0.0, exec).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(sk::SdagcThresholds(d_x.data(), x.size(), {{90, 11}}, 3.0, exec).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("SDAGC cost relative to one streaming pass at d = 25.6M", "[.bench]") {
  constexpr std::size_t kLayers = 50, kLayer = 512000, n = kLayers * kLayer;
  std::vector<sk::Segment> layers;
  for (std::size_t l = 0; l < kLayers; ++l) layers.push_back({l * kLayer, kLayer});
  sk::Scratch scratch;
  sk::Exec exec{nullptr, &scratch};
  sk::DeviceArray<float> d_x(SignedSamples(Shape::kGaussian, n, 2));
  sk::DeviceArray<std::uint32_t> d_idx(n);
  sk::DeviceArray<float> d_val(n);
  auto best = [](auto f) {
    f();
    double b = std::numeric_limits<double>::infinity();
    for (int r = 0; r < 7; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      b = std::min(b, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return b;
  };
  const double stream = best([&] { REQUIRE(sk::SumAbs(d_x.data(), n, exec).ok()); });
  std::vector<float> tau;
  const double estimate = best([&] { tau = *sk::SdagcThresholds(d_x.data(), n, layers, 3.09, exec); });
  auto select = [&] {
    std::size_t out = 0;
    for (std::size_t l = 0; l < kLayers; ++l) {
      auto c = sk::ThresholdSelect(d_x.data() + layers[l].offset, kLayer, tau[l], n - out, d_idx.data() + out,
                                   d_val.data() + out, exec);
      REQUIRE(c.ok());
      out += *c;
    }
  };
  const double sel = best(select);
  const double both = best([&] {
    tau = *sk::SdagcThresholds(d_x.data(), n, layers, 3.09, exec);
    select();
  });
  std::printf("backend %s x%d, n = %zu in %zu layers, streaming pass %.2f ms\n", sk::BackendName(),
              sk::BackendParallelism(), n, kLayers, stream * 1e3);
  std::printf("SDAGC: thresholds %.2f ms (%.2fx), per-layer ThresholdSelect %.2f ms (%.2fx), both %.2f ms (%.2fx)\n",
              estimate * 1e3, estimate / stream, sel * 1e3, sel / stream, both * 1e3, both / stream);
}
