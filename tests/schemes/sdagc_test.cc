// SDAGC (schemes/sdagc.h): achieved density vs the Gaussian tail, per-layer thresholds, residual
// accumulation and masking, clipping, λ = 0 equivalence, convergence, bytes, NaN guard, checkpoints,
// config errors, default compression and the closed loop.
#include "schemes/sdagc.h"

#include <cmath>
#include <set>

#include <catch2/catch.hpp>

#include "job/job_spec.h"
#include "support/local_momentum_reference.h"
#include "support/scheme_checks.h"
#include "support/simulation.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

SchemeFactory Sdagc(const SdagcConfig& config = {}) {
  return [config](SchemeContext ctx) { return MakeSdagcScheme(std::move(ctx), config); };
}

SdagcConfig Constant(double lambda, double momentum = 0.9) {
  SdagcConfig c;
  c.lambda_initial = c.lambda_final = lambda;
  c.warmup = JobSpan();
  c.closed_loop = false;
  c.momentum.momentum = momentum;
  return c;
}

// {i in [lo, hi) : |x_i| > float(λ σ)}, σ the population std of x[lo, hi) (host, double).
std::set<std::uint32_t> HostThresholdSet(const std::vector<float>& x, std::size_t lo, std::size_t hi, double lambda) {
  double s = 0, s2 = 0;
  for (std::size_t i = lo; i < hi; ++i) s += x[i];
  const double mean = s / (hi - lo);
  for (std::size_t i = lo; i < hi; ++i) s2 += (x[i] - mean) * (x[i] - mean);
  const auto tau = static_cast<float>(lambda * std::sqrt(s2 / (hi - lo)));
  std::set<std::uint32_t> out;
  for (std::size_t i = lo; i < hi; ++i) {
    if (std::abs(x[i]) > tau) out.insert(static_cast<std::uint32_t>(i));
  }
  return out;
}

using Bounds = std::vector<std::pair<std::size_t, std::size_t>>;

// SDAGC's selection over layers [lo, hi): the threshold set, or the largest nonzero |x| of a layer
// the threshold leaves empty (min_per_layer = 1).
std::set<std::uint32_t> HostSelection(const std::vector<float>& x, const Bounds& layers, double lambda) {
  std::set<std::uint32_t> out;
  for (auto [lo, hi] : layers) {
    auto layer = HostThresholdSet(x, lo, hi, lambda);
    if (layer.empty()) {
      const auto top = *TopKIndices(x, lo, hi, 1).begin();
      if (x[top] != 0.0f) layer.insert(top);
    }
    out.insert(layer.begin(), layer.end());
  }
  return out;
}

std::string ConfigError(const std::string& section) { return SchemeConfigError("sdagc", section); }

}  // namespace

TEST_CASE("SDAGC density on Gaussian gradients matches erfc(λ/√2), λ from the schedule", "[schemes][sdagc]") {
  // (lambda_final, warm-up in epochs (-1: the default [4 epochs, 10%]), round) -> λ_t = 1 + (λ_final - 1)
  // min(round / warm-up rounds, 1), on a job of 100 rounds per epoch and 1000 rounds in all.
  const JobClock clock{100, 1000};
  const auto [lambda_final, warmup, round, lambda] =
      GENERATE(table<double, double, std::uint64_t, double>({{1.0, 0.0, 0, 1.0},
                                                             {2.0, 0.0, 300, 2.0},
                                                             {3.09, 4.0, 500, 3.09},
                                                             {3.09, 4.0, 200, 2.045},
                                                             {3.09, 4.0, 0, 1.0},
                                                             {3.09, -1.0, 50, 2.045},  // 10% = 100 rounds
                                                             {3.09, -1.0, 100, 3.09}}));
  const std::size_t d = 200000;
  SdagcConfig c;
  c.closed_loop = false;
  c.lambda_final = lambda_final;
  if (warmup >= 0) c.warmup = JobSpan::Epochs(warmup);
  auto scheme = MakeSdagcScheme(SchemeContext{0, 1, 0, d, MakeLayerTable({{"w", {400, 500}}}), 1, 1, 0, clock}, c);
  std::mt19937_64 rng(31);
  // The scheme's first round (v = g), whatever its number.
  const SparseVector sent = DriveRound(*scheme, Gaussian(d, rng, 0.01f), round, round / 100.0);
  const double density = static_cast<double>(sent.idx.size()) / d;
  const double want = std::erfc(lambda / std::sqrt(2.0));
  INFO("λ = " << lambda << ": density " << density << ", erfc(λ/√2) = " << want);
  CHECK(std::abs(density - want) < 0.05 * want);
  CHECK(scheme->selected() == sent.idx.size());
}

TEST_CASE("SDAGC thresholds each layer by its own σ, scaling a layer keeps its selection", "[schemes][sdagc]") {
  const LayerTable layers = MakeLayerTable({{"a", {50, 40}}, {"b", {30}}, {"c", {30, 30}}});
  std::mt19937_64 rng(4);
  auto g = Gaussian(2930, rng);
  for (std::size_t i = 2000; i < 2030; ++i) g[i] *= 100.0f;  // a loud bias
  for (std::size_t i = 2030; i < 2930; ++i) g[i] *= 0.001f;  // a quiet matrix
  auto run = [&](const std::vector<float>& grad) {
    auto scheme = MakeSdagcScheme(SchemeContext{0, 1, 0, 2930, layers, 1, 1}, Constant(1.5));
    return DriveRound(*scheme, grad, 0, 0.0);
  };
  const SparseVector sent = run(g);
  const auto want = HostSelection(g, {{0, 2000}, {2000, 2030}, {2030, 2930}}, 1.5);
  CHECK(std::set<std::uint32_t>(sent.idx.begin(), sent.idx.end()) == want);
  std::size_t quiet = 0;
  for (auto i : sent.idx) quiet += i >= 2030;
  CHECK(quiet > 50);  // a global threshold would select none of the quiet layer
  auto scaled = g;
  for (std::size_t i = 2030; i < 2930; ++i) scaled[i] *= 64.0f;  // exact in float
  CHECK(run(scaled).idx == sent.idx);
}

TEST_CASE("SDAGC accumulates residuals exactly and masks u and v at the sent indices", "[schemes][sdagc][ef]") {
  const bool nesterov = GENERATE(false, true);
  const LayerTable layers = MakeLayerTable({{"w", {10, 5}}, {"b", {10}}});
  SdagcConfig c = Constant(1.2, 0.5);
  c.momentum.nesterov = nesterov;
  auto scheme = MakeSdagcScheme(SchemeContext{0, 1, 0, 60, layers, 1, 9}, c);
  MomentumReference ref(60, 0.5f, nesterov);
  std::mt19937_64 rng(5);
  for (std::uint64_t round = 0; round < 12; ++round) {
    const auto g = Gaussian(60, rng);
    ref.Accumulate(g);
    const auto want = HostSelection(ref.v, {{0, 50}, {50, 60}}, 1.2);
    const SparseVector sent = DriveRound(*scheme, g, round, 1.0);
    CHECK(std::set<std::uint32_t>(sent.idx.begin(), sent.idx.end()) == want);
    for (std::size_t j = 0; j < sent.idx.size(); ++j) REQUIRE(sent.val[j] == ref.v[sent.idx[j]]);
    ref.Take(sent.idx, [](std::uint32_t) { return true; });
    const SchemeState state = scheme->SaveState();
    REQUIRE(state.arrays.at("velocity") == ref.v);  // sent + remaining == accumulated, bitwise
    REQUIRE(state.arrays.at("momentum") == ref.u);  // u zeroed exactly at the sent indices
  }
}

TEST_CASE("SDAGC local clipping bounds each layer's gradient norm by C / sqrt(P)", "[schemes][sdagc][clip]") {
  const LayerTable layers = MakeLayerTable({{"w", {10, 5}}, {"b", {10}}});
  std::mt19937_64 rng(8);
  auto g = Gaussian(60, rng);
  for (int i = 50; i < 60; ++i) g[i] *= 0.01f;
  SdagcConfig c = Constant(0.0, 0.0);  // λ = 0 sends every nonzero entry: the clipped gradient
  c.momentum.clip_norm = 2.0;
  auto scheme = MakeSdagcScheme(SchemeContext{0, 16, 0, 60, layers, 1, 1}, c);
  const SparseVector sent = DriveRound(*scheme, g, 0, 0.0);
  REQUIRE(sent.idx.size() == 60);
  const double bound = 2.0 / 4.0;  // C / sqrt(16)
  const double scale = bound / (HostNorm(g, 0, 50) + 1e-6);
  CHECK(HostNorm(sent.val, 0, 50) <= bound * (1 + 1e-6));
  for (int i = 0; i < 50; ++i) CHECK(sent.val[i] == Approx(g[i] * scale).epsilon(1e-6));
  for (int i = 50; i < 60; ++i) CHECK(sent.val[i] == g[i]);
}

TEST_CASE("SDAGC with λ = 0 equals dense SGD without momentum", "[schemes][sdagc]") {
  ExpectMatches(LeastSquares(200, 50, 2), Sdagc(Constant(0.0, 0.9)), Dense(), MomentumSimOptions(4, 2, 25, Layers50()),
                1e-6);
}

TEST_CASE("SDAGC converges to the least-squares optimum", "[schemes][sdagc][convergence]") {
  const auto opts = MomentumSimOptions(GENERATE(1u, 4u, 8u), 2, 600, Layers50());
  SdagcConfig c;
  c.lambda_final = 1.5;  // about 13% of a Gaussian layer
  c.closed_loop = false;
  c.warmup = JobSpan::Rounds(2);
  c.momentum.momentum = 0.5;
  const auto r = ExpectConvergesOnLeastSquares(Sdagc(c), opts, 1e-3);
  double selected = 0;
  for (std::size_t i = 100; i < r.selected.size(); ++i) selected += r.selected[i];
  const double density = selected / (r.selected.size() - 100) / 50.0;
  INFO("density " << density);
  CHECK(density < 0.35);
}

TEST_CASE("SDAGC converges on logistic regression", "[schemes][sdagc][convergence][long]") {
  auto opts = MomentumSimOptions(GENERATE(1u, 4u, 8u), 2, 1500, Layers30());
  opts.optimizer.lr.base_lr = 1.0;
  const auto r = ExpectConvergesOnLogistic(Sdagc(Constant(1.5, 0.0)), opts, 1e-3);
  double selected = 0;
  for (auto s : r.selected) selected += s;
  const double density = selected / r.selected.size() / 30.0;
  INFO("density " << density);
  CHECK(density < 0.35);
}

TEST_CASE("SDAGC bytes per phase follow the documented formula", "[schemes][sdagc][bytes]") {
  const std::uint32_t p = 3;
  const LeastSquares problem(100, 50, 1);
  auto opts = MomentumSimOptions(p, 2, 1, Layers50());
  auto r = Simulate(Sdagc(Constant(1.0)), problem, opts);
  REQUIRE(r.status.ok());
  // Round 0: w = 0, v = u = g; each worker sends |{|g_i| > λ σ_l}| entries of 8 bytes.
  std::set<std::uint32_t> uni;
  std::size_t worker0 = 0;
  std::vector<float> g;
  for (std::uint32_t w = 0; w < p; ++w) {
    problem.Gradient(std::vector<float>(50, 0.0f), w, p, 0, g);
    const auto selected = HostSelection(g, {{0, 25}, {25, 45}, {45, 50}}, 1.0);
    uni.insert(selected.begin(), selected.end());
    if (w == 0) worker0 = selected.size();
  }
  CHECK(r.traffic[0].bytes_up == 8 * worker0);
  CHECK(r.traffic[0].bytes_down == 8 * uni.size());
  CHECK(r.selected[0] == worker0);
}

TEST_CASE("SDAGC: a worker with a non-finite gradient skips, replicas stay identical", "[schemes][sdagc][nan]") {
  auto opts = MomentumSimOptions(4, 2, 30, Layers50());
  opts.tamper = PoisonGradients({{1, 7, 3, kNaN}, {2, 9, 13, -kInf}});  // both in shard 0
  SdagcConfig c = Constant(1.0);
  c.closed_loop = true;
  c.target_density = 0.2;
  ExpectSkipsNonFinite(Sdagc(c), LeastSquares(200, 50, 3), opts);
}

TEST_CASE("SDAGC state round-trips through Save/Restore, bad state is rejected", "[schemes][sdagc][state]") {
  const LayerTable layers = MakeLayerTable({{"w", {100, 5}}, {"b", {10}}});
  SdagcConfig c;
  c.closed_loop = true;
  c.target_density = 0.05;
  c.warmup = JobSpan::Rounds(2);
  const SchemeContext ctx{1, 4, 0, 510, layers, 1, 9};
  auto a = MakeSdagcScheme(ctx, c);
  std::mt19937_64 rng(2);
  for (std::uint64_t round = 0; round < 4; ++round) DriveRound(*a, Gaussian(510, rng), round, 0.5 * round);
  CHECK(a->SaveState().scalars.at("lambda") != c.lambda_final);  // the loop moved λ
  auto b = MakeSdagcScheme(ctx, c);
  REQUIRE(b->RestoreState(a->SaveState()).ok());
  for (std::uint64_t round = 4; round < 8; ++round) {
    const auto g = Gaussian(510, rng);
    CHECK(DriveRound(*a, g, round, 0.5 * round) == DriveRound(*b, g, round, 0.5 * round));
  }
  CHECK(b->SaveState().arrays == a->SaveState().arrays);
  CHECK(b->SaveState().scalars == a->SaveState().scalars);
  SchemeState bad = a->SaveState();
  bad.scalars.erase("lambda");
  CHECK(b->RestoreState(bad).code() == absl::StatusCode::kInvalidArgument);
  bad = a->SaveState();
  bad.scalars["lambda"] = 100.0;  // outside [min_lambda, max_lambda]
  CHECK(b->RestoreState(bad).code() == absl::StatusCode::kInvalidArgument);
  bad = a->SaveState();
  bad.arrays.erase("velocity");
  CHECK(b->RestoreState(bad).code() == absl::StatusCode::kInvalidArgument);
  bad = a->SaveState();
  bad.arrays["momentum"].push_back(0.0f);
  CHECK(b->RestoreState(bad).code() == absl::StatusCode::kInvalidArgument);
  CHECK(b->SaveState().arrays == a->SaveState().arrays);
  CHECK(b->SaveState().scalars == a->SaveState().scalars);
}

TEST_CASE("SDAGC config errors name the key", "[schemes][sdagc][config]") {
  SdagcConfig c;
  CHECK(c.Validate("scheme.sdagc").ok());
  c.lambda_final = -1.0;
  CHECK_THAT(std::string(c.Validate("scheme.sdagc").message()), Catch::StartsWith("scheme.sdagc.lambda_final"));
  CHECK_THAT(ConfigError("{lambda_initial: .nan}"), Catch::StartsWith("scheme.sdagc.lambda_initial"));
  CHECK_THAT(ConfigError("{warmup_epochs: -2}"), Catch::StartsWith("scheme.sdagc.warmup_epochs"));
  CHECK_THAT(ConfigError("{warmup: -2 rounds}"), Catch::StartsWith("scheme.sdagc.warmup: '-2 rounds' is negative"));
  CHECK_THAT(ConfigError("{warmup: 1 epoch, warmup_epochs: 1}"), Catch::StartsWith("scheme.sdagc.warmup_epochs"));
  CHECK_THAT(ConfigError("{target_density: 1}"), Catch::StartsWith("scheme.sdagc.target_density"));
  CHECK_THAT(ConfigError("{gain: 3}"), Catch::StartsWith("scheme.sdagc.gain"));
  CHECK_THAT(ConfigError("{min_lambda: 0}"), Catch::StartsWith("scheme.sdagc.min_lambda"));
  CHECK_THAT(ConfigError("{max_lambda: 0.1}"), Catch::StartsWith("scheme.sdagc.max_lambda"));
  CHECK_THAT(ConfigError("{closed_loop: true, lambda_final: 20}"), Catch::StartsWith("scheme.sdagc.lambda_final"));
  CHECK_THAT(ConfigError("{momentum: -0.1}"), Catch::StartsWith("scheme.sdagc.momentum"));
  CHECK_THAT(ConfigError("{lambda: 3}"), Catch::StartsWith("scheme.sdagc: unknown key 'lambda'"));
  auto job = ParseJobSpec("scheme: {name: sdagc, sdagc: {lambda_final: 3.3, closed_loop: true, clip_norm: 1}}\n",
                          "t.yaml", {});
  REQUIRE(job.ok());
  CHECK_FALSE(job->scheme.global_momentum);
  CHECK(std::string(job->scheme.make(SchemeContext{0, 4, 0, 100, {}, 1, 1})->name()) == "sdagc");
}

TEST_CASE("SDAGC defaults at density 0.001 compress >= 400x on Gaussian layers after warm-up", "[schemes][sdagc]") {
  const std::size_t d = 100000;  // k = 100: density 0.001; the default warm-up is 4 rounds here (clock 1/epoch)
  auto scheme = MakeSdagcScheme(SchemeContext{0, 8, 0, d, MakeLayerTable({{"w", {200, 500}}}), 100, 1}, SdagcConfig{});
  std::mt19937_64 rng(12);
  double worst = 0, mean = 0;
  for (std::uint64_t round = 0; round < 64; ++round) {
    const SparseVector sent = DriveRound(*scheme, Gaussian(d, rng), round, static_cast<double>(round));
    const double density = static_cast<double>(sent.idx.size()) / d;
    if (round < 4) continue;
    worst = std::max(worst, density);
    mean += density / 60;
  }
  INFO("rounds 4-63: largest density " << worst << ", mean " << mean);
  CHECK(worst <= 1.0 / 800);  // 8 bytes per entry: >= 400x fewer bytes than fp32 dense
  CHECK(mean >= 0.0005);      // the closed loop does not overshoot into silence
}

TEST_CASE("SDAGC closed loop steers heavy-tailed layers to the target density", "[schemes][sdagc]") {
  const std::size_t d = 100000;
  // The target given, or (the default, target_density 0) the job's density k / d.
  const auto [target, k] = GENERATE(table<double, std::uint64_t>({{0.002, 1}, {0.0, 200}}));
  SdagcConfig c;  // closed loop, momentum 0.9, gain 0.1
  c.target_density = target;
  c.warmup = JobSpan();
  auto scheme = MakeSdagcScheme(SchemeContext{0, 1, 0, d, MakeLayerTable({{"w", {200, 500}}}), k, 1}, c);
  std::mt19937_64 rng(13);
  std::exponential_distribution<float> expo(1.0f);
  std::bernoulli_distribution sign(0.5);
  std::vector<double> densities;
  for (std::uint64_t round = 0; round < 160; ++round) {
    std::vector<float> g(d);
    for (auto& v : g) v = (sign(rng) ? 1.0f : -1.0f) * expo(rng);  // Laplace
    densities.push_back(static_cast<double>(DriveRound(*scheme, g, round, 1.0).idx.size()) / d);
  }
  double mean = 0, max = 0;
  for (std::size_t r = 100; r < 160; ++r) mean += densities[r] / 60, max = std::max(max, densities[r]);
  INFO("first round " << densities.front() << ", rounds 100-159: mean " << mean << ", max " << max);
  CHECK(densities.front() > 2 * 0.002);  // open-loop λ_final overshoots on Laplace layers
  CHECK(std::abs(mean - 0.002) < 0.1 * 0.002);
  CHECK(max < 2 * 0.002);
}
