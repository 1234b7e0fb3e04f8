#include "engine/optimizer.h"

#include <cmath>
#include <random>

#include <catch2/catch.hpp>

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
    REQUIRE(opt.Apply(agg, d_w.data(), StepClock{}).ok());
    ReferenceStep(w, v, g, 0.05f, 0.9f, static_cast<float>(wd), nesterov);
  }
  CHECK(d_w.ToHost() == w);
  CHECK(opt.State() == v);
}

TEST_CASE("Optimizer without momentum updates only the sparse entries", "[optimizer]") {
  OptimizerConfig cfg;
  cfg.lr.base_lr = 0.5;
  Optimizer opt(cfg, 10, /*use_momentum=*/false);
  CHECK(opt.momentum() == 0.0);
  kernels::DeviceArray<float> d_w(std::vector<float>(10, 1.0f));
  REQUIRE(opt.Apply(SparseVector{10, {2, 9}, {2.0f, -4.0f}}, d_w.data(), StepClock{}).ok());
  auto w = d_w.ToHost();
  CHECK(w[2] == 0.0f);
  CHECK(w[9] == 3.0f);
  CHECK(w[0] == 1.0f);
  CHECK(opt.Apply(SparseVector{10, {10}, {1.0f}}, d_w.data(), StepClock{}).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(opt.Apply(SparseVector{11, {1}, {1.0f}}, d_w.data(), StepClock{}).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("The external optimizer writes the aggregate itself into the destination and keeps no state", "[optimizer]") {
  OptimizerConfig cfg;
  cfg.kind = OptimizerKind::kExternal;
  REQUIRE(ValidateOptimizerConfig(cfg).ok());
  Optimizer opt(cfg, 6, /*global_momentum=*/true);
  CHECK(opt.momentum() == 0.0);
  CHECK(opt.state_size() == 0);
  CHECK(OptimizerStateSize(cfg, 6, true) == 0);
  kernels::DeviceArray<float> d_w(std::vector<float>(6, 7.0f));
  REQUIRE(opt.Apply(SparseVector{6, {1, 4}, {2.0f, -3.0f}}, d_w.data(), StepClock{3, 0.5}).ok());
  CHECK(d_w.ToHost() == std::vector<float>{0, 2, 0, 0, -3, 0});  // every other entry zeroed
  REQUIRE(opt.Apply(DenseValues{{1, 2, 3, 4, 5, 6}}, d_w.data(), StepClock{}).ok());
  CHECK(d_w.ToHost() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(opt.Apply(DenseValues{{1, 2}}, d_w.data(), StepClock{}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(opt.Apply(SparseVector{7, {1}, {1.0f}}, d_w.data(), StepClock{}).code() == absl::StatusCode::kInvalidArgument);
  cfg.weight_decay = 0.01;
  CHECK_THAT(std::string(ValidateOptimizerConfig(cfg).message()), Catch::Contains("optimizer.weight_decay"));
  CHECK(std::string(OptimizerName(OptimizerKind::kExternal)) == "external");
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

namespace {

// Host reference of torch's single-tensor Adam/AdamW step t (1-based), scalars in double as torch
// computes them, tensors in float.
void ReferenceAdam(std::vector<float>& w, std::vector<float>& m, std::vector<float>& v, const std::vector<float>& g,
                   double lr, double b1, double b2, double eps, double wd, bool decoupled, int t, bool update_v,
                   std::size_t decay_lo, std::size_t decay_hi) {
  const double bc1 = 1.0 - std::pow(b1, t), bc2_sqrt = std::sqrt(1.0 - std::pow(b2, t));
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double d = i >= decay_lo && i < decay_hi ? wd : 0.0;
    if (decoupled) w[i] *= static_cast<float>(1.0 - lr * d);
    const float grad = decoupled ? g[i] : g[i] + static_cast<float>(d) * w[i];
    m[i] = m[i] * static_cast<float>(b1) + grad * static_cast<float>(1.0 - b1);
    if (update_v) v[i] = v[i] * static_cast<float>(b2) + static_cast<float>(1.0 - b2) * grad * grad;
    const float denom = std::sqrt(v[i]) / static_cast<float>(bc2_sqrt) + static_cast<float>(eps);
    w[i] += (-static_cast<float>(lr / bc1) * m[i]) / denom;
  }
}

}  // namespace

TEST_CASE("Adam and AdamW match torch's update, with exempt layers and a frozen variance", "[optimizer]") {
  const auto kind = GENERATE(OptimizerKind::kAdam, OptimizerKind::kAdamW);
  const bool freeze = GENERATE(false, true);
  const std::uint64_t dim = 200;
  OptimizerConfig cfg;
  cfg.kind = kind;
  cfg.lr.base_lr = 0.01;
  cfg.beta1 = 0.9;
  cfg.beta2 = 0.98;
  cfg.eps = 1e-6;
  cfg.weight_decay = 0.1;
  cfg.no_decay = {"b"};  // layer "b" covers [120, 200)
  if (freeze) cfg.freeze_variance_round = 3;
  REQUIRE(ValidateOptimizerConfig(cfg).ok());

  const LayerTable layers = MakeLayerTable({{"a", {120}}, {"b", {80}}});
  Optimizer opt(cfg, dim, /*global_momentum=*/true, layers);
  CHECK(opt.state_size() == 2 * dim);
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> w(dim), m(dim, 0.0f), v(dim, 0.0f);
  for (auto& x : w) x = normal(rng);
  kernels::DeviceArray<float> d_w(w);
  for (int round = 0; round < 6; ++round) {
    std::vector<float> g(dim, 0.0f);
    Aggregate agg;
    if (round % 2 == 0) {
      for (auto& x : g) x = normal(rng);
      agg = DenseValues{g};
    } else {  // sparse aggregates still move every moment
      SparseVector s{dim, {5, 130, 199}, {0.5f, -1.0f, 2.0f}};
      for (std::size_t i = 0; i < s.idx.size(); ++i) g[s.idx[i]] = s.val[i];
      agg = s;
    }
    REQUIRE(opt.Apply(agg, d_w.data(), StepClock{static_cast<std::uint64_t>(round), 0.0}).ok());
    ReferenceAdam(w, m, v, g, 0.01, 0.9, 0.98, 1e-6, 0.1, kind == OptimizerKind::kAdamW, round + 1,
                  !freeze || round < 3, 0, 120);
  }
  const auto got = d_w.ToHost();
  for (std::size_t i = 0; i < dim; ++i) CHECK(got[i] == Approx(w[i]).epsilon(1e-6).margin(1e-7));
  std::vector<float> state = m;
  state.insert(state.end(), v.begin(), v.end());
  const auto have = opt.State();
  REQUIRE(have.size() == state.size());
  for (std::size_t i = 0; i < state.size(); ++i) CHECK(have[i] == Approx(state[i]).epsilon(1e-6).margin(1e-9));
  // The state restores into a fresh optimizer; a wrong size is refused, naming the optimizer.
  Optimizer other(cfg, dim, true, layers);
  CHECK(other.SetState(have).ok());
  CHECK(other.State() == have);
  const absl::Status bad = other.SetState(std::vector<float>(dim));
  CHECK(bad.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad.message()), Catch::Contains(OptimizerName(kind)));
}

TEST_CASE("Adam for a local-momentum scheme runs with beta1 0", "[optimizer]") {
  OptimizerConfig cfg;
  cfg.kind = OptimizerKind::kAdamW;
  cfg.lr.base_lr = 0.1;
  Optimizer opt(cfg, 3, /*global_momentum=*/false);
  CHECK(opt.momentum() == 0.0);
  kernels::DeviceArray<float> d_w(std::vector<float>(3, 0.0f));
  REQUIRE(opt.Apply(DenseValues{{1.0f, -2.0f, 0.0f}}, d_w.data(), StepClock{}).ok());
  // m = g, v = 0.001 g^2 / (1 - 0.999) = g^2 at step 1: the step is lr * sign(g).
  const auto w = d_w.ToHost();
  CHECK(w[0] == Approx(-0.1).epsilon(1e-5));
  CHECK(w[1] == Approx(0.1).epsilon(1e-5));
  CHECK(w[2] == 0.0f);
}

TEST_CASE("Adam's config is validated by key", "[optimizer]") {
  OptimizerConfig cfg;
  cfg.kind = OptimizerKind::kAdamW;
  CHECK(ValidateOptimizerConfig(cfg).ok());
  cfg.beta2 = 1.0;
  CHECK_THAT(std::string(ValidateOptimizerConfig(cfg).message()), Catch::Contains("optimizer.betas[1]"));
  cfg = OptimizerConfig{};
  cfg.kind = OptimizerKind::kAdam;
  cfg.eps = 0;
  CHECK_THAT(std::string(ValidateOptimizerConfig(cfg).message()), Catch::Contains("optimizer.eps"));
  cfg = OptimizerConfig{};
  cfg.freeze_variance_round = 10;
  CHECK_THAT(std::string(ValidateOptimizerConfig(cfg).message()), Catch::Contains("optimizer.freeze_variance"));
}

TEST_CASE("A gradient in device memory steps bitwise as the same host aggregate, and the state copies on the device",
          "[optimizer]") {
  const auto kind =
      GENERATE(OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdamW, OptimizerKind::kExternal);
  const double momentum = GENERATE(0.0, 0.9);
  const std::uint64_t dim = 150;
  OptimizerConfig cfg;
  cfg.kind = kind;
  cfg.lr.base_lr = 0.02;
  cfg.momentum = momentum;
  cfg.nesterov = momentum > 0.0;
  // Without momentum and weight decay SGD is plain (a sparse aggregate updates only its entries).
  if (kind != OptimizerKind::kExternal && momentum > 0.0) cfg.weight_decay = 0.01;
  cfg.no_decay = {"b"};
  const LayerTable layers = MakeLayerTable({{"a", {100}}, {"b", {50}}});
  Optimizer host_path(cfg, dim, true, layers), device_path(cfg, dim, true, layers);
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> w(dim);
  for (auto& x : w) x = normal(rng);
  kernels::DeviceArray<float> d_w1(w), d_w2(w);
  for (std::uint64_t round = 0; round < 4; ++round) {
    std::vector<float> g(dim);
    for (auto& x : g) x = normal(rng);
    const kernels::DeviceArray<float> d_g(g);
    const StepClock clock{round, 0.25 * static_cast<double>(round)};
    REQUIRE(host_path.Apply(DenseValues{g}, d_w1.data(), clock).ok());
    REQUIRE(device_path.ApplyDense(d_g.data(), d_w2.data(), clock).ok());
  }
  CHECK(d_w2.ToHost() == d_w1.ToHost());
  CHECK(device_path.State() == host_path.State());
  // The state copies between optimizers on the device, and resets to zeros.
  Optimizer copy(cfg, dim, true, layers);
  REQUIRE(copy.SetStateFrom(device_path.state_data(), device_path.state_size()).ok());
  CHECK(copy.State() == host_path.State());
  copy.ResetState();
  CHECK(copy.State() == std::vector<float>(copy.state_size(), 0.0f));
}
