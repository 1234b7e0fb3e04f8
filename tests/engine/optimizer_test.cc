#include "engine/optimizer.h"

#include <catch2/catch.hpp>
#include <random>

using namespace sketchps;

namespace {

// Host reference of one SGD step in float, in the order the kernel computes it.
void ReferenceStep(std::vector<float>& w, std::vector<float>& v, const std::vector<float>& g, float lr, float m,
                   float wd, bool nesterov) {
  for (std::size_t i = 0; i < w.size(); ++i) {
    const float grad = g[i] + wd * w[i];
    if (m == 0.0f) {
      w[i] -= lr * grad;
      continue;
    }
    v[i] = m * v[i] + grad;
    w[i] -= lr * (nesterov ? grad + m * v[i] : v[i]);
  }
}

}  // namespace

TEST_CASE("Learning-rate schedules", "[optimizer]") {
  LrSchedule s;
  s.base_lr = 0.4;
  CHECK(LearningRate(s, 3.0) == Approx(0.4));
  s.warmup_epochs = 2;
  s.warmup_start_factor = 0.25;
  CHECK(LearningRate(s, 0.0) == Approx(0.1));
  CHECK(LearningRate(s, 1.0) == Approx(0.25));
  CHECK(LearningRate(s, 2.0) == Approx(0.4));
  s.kind = LrSchedule::Kind::kStep;
  s.milestones = {5, 8};
  s.gamma = 0.1;
  CHECK(LearningRate(s, 6.0) == Approx(0.04));
  CHECK(LearningRate(s, 9.0) == Approx(0.004));
  s = LrSchedule{};
  s.kind = LrSchedule::Kind::kCosine;
  s.base_lr = 1.0;
  s.total_epochs = 10;
  CHECK(LearningRate(s, 5.0) == Approx(0.5));
  CHECK(LearningRate(s, 10.0) == Approx(0.0).margin(1e-12));
}

TEST_CASE("Optimizer matches the host reference for dense and sparse aggregates", "[optimizer]") {
  const bool nesterov = GENERATE(false, true);
  const double wd = GENERATE(0.0, 0.01);
  const std::uint64_t dim = 300;
  OptimizerConfig cfg;
  cfg.lr.base_lr = 0.05;
  cfg.momentum = 0.9;
  cfg.nesterov = nesterov;
  cfg.weight_decay = wd;
  Optimizer opt(cfg, dim, /*use_momentum=*/true);
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> w(dim), v(dim, 0.0f);
  for (auto& x : w) x = normal(rng);
  kernels::DeviceArray<float> d_w(w);
  for (int step = 0; step < 5; ++step) {
    std::vector<float> g(dim, 0.0f);
    Aggregate agg;
    if (step % 2 == 0) {
      for (auto& x : g) x = normal(rng);
      agg = DenseValues{g};
    } else {
      SparseVector s{dim, {3, 77, 299}, {1.5f, -2.0f, 0.25f}};
      for (std::size_t i = 0; i < s.idx.size(); ++i) g[s.idx[i]] = s.val[i];
      agg = s;
    }
    REQUIRE(opt.Apply(agg, d_w.data(), 0.0).ok());
    ReferenceStep(w, v, g, 0.05f, 0.9f, static_cast<float>(wd), nesterov);
  }
  CHECK(d_w.ToHost() == w);
  CHECK(opt.Velocity() == v);
}

TEST_CASE("Optimizer without momentum updates only the sparse entries", "[optimizer]") {
  OptimizerConfig cfg;
  cfg.lr.base_lr = 0.5;
  Optimizer opt(cfg, 10, /*use_momentum=*/false);
  CHECK(opt.momentum() == 0.0);
  kernels::DeviceArray<float> d_w(std::vector<float>(10, 1.0f));
  REQUIRE(opt.Apply(SparseVector{10, {2, 9}, {2.0f, -4.0f}}, d_w.data(), 0.0).ok());
  auto w = d_w.ToHost();
  CHECK(w[2] == 0.0f);
  CHECK(w[9] == 3.0f);
  CHECK(w[0] == 1.0f);
  CHECK(opt.Apply(SparseVector{10, {10}, {1.0f}}, d_w.data(), 0.0).code() == absl::StatusCode::kInvalidArgument);
  CHECK(opt.Apply(SparseVector{11, {1}, {1.0f}}, d_w.data(), 0.0).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Optimizer config validation names the key", "[optimizer]") {
  OptimizerConfig cfg;
  cfg.momentum = 1.0;
  CHECK_THAT(std::string(ValidateOptimizerConfig(cfg).message()), Catch::Contains("optimizer.momentum"));
  cfg = OptimizerConfig{};
  cfg.lr.base_lr = -1;
  CHECK_THAT(std::string(ValidateOptimizerConfig(cfg).message()), Catch::Contains("optimizer.lr"));
  cfg = OptimizerConfig{};
  cfg.momentum = 0;
  cfg.nesterov = true;
  CHECK_THAT(std::string(ValidateOptimizerConfig(cfg).message()), Catch::Contains("optimizer.nesterov"));
  CHECK(ValidateOptimizerConfig(OptimizerConfig{}).ok());
}
