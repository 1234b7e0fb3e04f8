// DGC (schemes/dgc.h): warm-up schedule, selection, velocity conservation and masking, clipping,
// density-1 equivalences, convergence, bytes, NaN guard, checkpoints, config errors, compression.
#include "schemes/dgc.h"

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

SchemeFactory Dgc(const DgcConfig& config = {}, std::uint64_t warmup_rounds = 0) {
  return [config, warmup_rounds](SchemeContext ctx) {
    ctx.warmup_rounds = warmup_rounds;
    return MakeDgcScheme(std::move(ctx), config);
  };
}

DgcConfig ExactSelection() {
  DgcConfig c;
  c.sample_ratio = 1.0;  // τ = the exact k-th largest |v|: k entries exactly (no ties in the data)
  c.warmup = JobSpan();
  return c;
}

std::string ConfigError(const std::string& dgc_section) { return SchemeConfigError("dgc", dgc_section); }

}  // namespace

TEST_CASE("DGC sparsity warm-up follows the reference schedule", "[schemes][dgc]") {
  const JobClock clock{10, 0};  // 10 rounds per epoch, job length unknown
  DgcConfig c;
  c.warmup = JobSpan::Epochs(5);
  c.warmup_stages = 5;
  const double want[] = {0.316227766, 0.1, 0.0316227766, 0.01, 0.00316227766, 0.001, 0.001};
  for (int e = 0; e < 7; ++e) CHECK(DgcDensity(c, 0.001, 10 * e, clock) == Approx(want[e]).epsilon(1e-6));
  CHECK(DgcDensity(c, 0.001, 29, clock) == Approx(0.0316227766).epsilon(1e-6));  // whole stages
  c.warmup = JobSpan::Epochs(4);  // the paper's 75%, 93.75%, 98.4%, 99.6%, then 99.9% sparsity
  c.warmup_stages = 4;
  const double paper[] = {0.25, 0.0625, 0.015625, 0.004, 0.001};
  for (int e = 0; e < 5; ++e) CHECK(DgcDensity(c, 0.001, 10 * e, clock) == Approx(paper[e]).epsilon(0.02));
  c.warmup_densities = {0.5, 0.2, 0.1, 0.05};
  CHECK(DgcDensity(c, 0.001, 15, clock) == 0.2);
  CHECK(DgcDensity(c, 0.001, 40, clock) == 0.001);
  c.warmup = JobSpan();
  CHECK(DgcDensity(c, 0.01, 0, clock) == 0.01);
}

TEST_CASE("DGC's default warm-up is 4 epochs but at most a tenth of the job, in 4 equal stages", "[schemes][dgc]") {
  const DgcConfig c;  // warmup [4 epochs, 10%], 4 stages
  const double paper[] = {0.25, 0.0625, 0.015625, 0.004, 0.001};
  // One epoch of 468 rounds: 46.8 warm-up rounds, stages of 11.7 rounds; round 47 on at δ.
  const JobClock one_epoch{468, 468};
  const std::pair<std::uint64_t, int> stage_of[] = {{0, 0},  {11, 0}, {12, 1}, {23, 1}, {24, 2},
                                                    {35, 2}, {36, 3}, {46, 3}, {47, 4}, {467, 4}};
  for (const auto& [round, stage] : stage_of) {
    INFO("round " << round);
    CHECK(DgcDensity(c, 0.001, round, one_epoch) == Approx(paper[stage]).epsilon(0.02));
  }
  // A 100-epoch job: the paper's 4 epochs (1872 rounds), one stage per epoch.
  const JobClock long_job{468, 46800};
  CHECK(DgcDensity(c, 0.001, 467, long_job) == Approx(0.25).epsilon(0.02));
  CHECK(DgcDensity(c, 0.001, 468, long_job) == Approx(0.0625).epsilon(0.02));
  CHECK(DgcDensity(c, 0.001, 1871, long_job) == Approx(0.004).epsilon(0.02));
  CHECK(DgcDensity(c, 0.001, 1872, long_job) == 0.001);
  // Rounds and job fractions as the user gives them.
  DgcConfig r;
  r.warmup = JobSpan::Rounds(8);
  r.warmup_stages = 2;
  CHECK(DgcDensity(r, 0.01, 3, one_epoch) == Approx(std::pow(0.01, 1.0 / 3)));
  CHECK(DgcDensity(r, 0.01, 4, one_epoch) == Approx(std::pow(0.01, 2.0 / 3)));
  CHECK(DgcDensity(r, 0.01, 8, one_epoch) == 0.01);
  r.warmup = JobSpan::Fraction(0.5);
  CHECK(DgcDensity(r, 0.01, 116, one_epoch) == Approx(std::pow(0.01, 1.0 / 3)));  // 234 rounds, 2 stages
  CHECK(DgcDensity(r, 0.01, 117, one_epoch) == Approx(std::pow(0.01, 2.0 / 3)));
  CHECK(DgcDensity(r, 0.01, 234, one_epoch) == 0.01);
}

TEST_CASE("DGC sends the exact top-k of each matrix at the scheduled density and biases whole", "[schemes][dgc]") {
  const LayerTable layers = MakeLayerTable({{"w", {100, 100}}, {"b", {50}}});
  DgcConfig c = ExactSelection();
  c.warmup = JobSpan::Epochs(5);
  c.warmup_stages = 5;
  const JobClock clock{10, 0};
  std::mt19937_64 rng(11);
  for (int epoch = 0; epoch < 7; ++epoch) {
    // δ = 10 / 10050
    auto scheme = MakeDgcScheme(SchemeContext{0, 1, 0, 10050, layers, 10, 3, 0, clock}, c);
    const auto g = Gaussian(10050, rng);
    const std::uint64_t round = 10 * epoch + 5;
    const SparseVector sent = DriveRound(*scheme, g, round, epoch + 0.5);
    const double delta = DgcDensity(c, 10.0 / 10050.0, round, clock);
    const auto k = static_cast<std::size_t>(std::ceil(delta * 10000));
    std::set<std::uint32_t> want = TopKIndices(g, 0, 10000, k);
    for (std::uint32_t i = 10000; i < 10050; ++i) want.insert(i);
    CHECK(std::set<std::uint32_t>(sent.idx.begin(), sent.idx.end()) == want);
    CHECK(scheme->selected() == k + 50);
  }
}

TEST_CASE("DGC conserves velocity exactly and masks u and v at the sent indices", "[schemes][dgc][ef]") {
  const bool nesterov = GENERATE(false, true);
  const LayerTable layers = MakeLayerTable({{"w", {10, 5}}, {"b", {10}}});
  DgcConfig c;
  c.momentum.momentum = 0.5;
  c.momentum.nesterov = nesterov;
  c.warmup = JobSpan();
  auto scheme = MakeDgcScheme(SchemeContext{0, 1, 0, 60, layers, 6, 9}, c);  // δ = 0.1: k_w = 5
  MomentumReference ref(60, 0.5f, nesterov);
  std::vector<double> sum_in(60, 0.0), sum_sent(60, 0.0);  // what entered v, what left it
  std::mt19937_64 rng(5);
  for (std::uint64_t round = 0; round < 12; ++round) {
    const auto g = Gaussian(60, rng);
    ref.Accumulate(g);
    for (int i = 0; i < 60; ++i) sum_in[i] += nesterov ? ref.u[i] + g[i] : ref.u[i];
    const SparseVector sent = DriveRound(*scheme, g, round, 10.0);  // no warm-up
    std::size_t in_w = 0;
    for (std::size_t j = 0; j < sent.idx.size(); ++j) {
      REQUIRE(sent.val[j] == ref.v[sent.idx[j]]);  // values moved out of v, bitwise
      sum_sent[sent.idx[j]] += sent.val[j];
      in_w += sent.idx[j] < 50;
    }
    CHECK(in_w >= 4);  // [0.8 k, 1.3 k] for k = 5
    CHECK(in_w <= 6);
    CHECK(sent.idx.size() == in_w + 10);                         // every bias entry
    ref.Take(sent.idx, [](std::uint32_t i) { return i < 50; });  // biases keep their momentum
    const SchemeState state = scheme->SaveState();
    REQUIRE(state.arrays.at("velocity") == ref.v);  // remaining v == accumulated v off the sent set
    REQUIRE(state.arrays.at("momentum") == ref.u);  // masked exactly at the sent matrix entries
  }
  const auto v = scheme->SaveState().arrays.at("velocity");
  for (int i = 0; i < 60; ++i) CHECK(sum_sent[i] + v[i] == Approx(sum_in[i]).margin(1e-4));  // Σ sent + v_T == Σ u_t
}

TEST_CASE("DGC local clipping bounds the gradient norm by C / sqrt(P)", "[schemes][dgc][clip]") {
  const LayerTable layers = MakeLayerTable({{"w", {10, 5}}, {"b", {10}}});
  std::mt19937_64 rng(8);
  auto g = Gaussian(60, rng);
  for (int i = 50; i < 60; ++i) g[i] *= 0.01f;  // the bias is below the bound, the matrix far above
  DgcConfig c = ExactSelection();
  c.momentum.momentum = 0.0;
  c.momentum.clip_norm = 1.0;
  const double bound = 1.0 / std::sqrt(4.0);  // P = 4
  SECTION("per layer") {
    auto scheme = MakeDgcScheme(SchemeContext{0, 4, 0, 60, layers, 60, 1}, c);  // density 1: sends g'
    const SparseVector sent = DriveRound(*scheme, g, 0, 0.0);
    REQUIRE(sent.idx.size() == 60);
    const double scale = bound / (HostNorm(g, 0, 50) + 1e-6);
    CHECK(HostNorm(sent.val, 0, 50) <= bound * (1 + 1e-6));
    for (int i = 0; i < 50; ++i) CHECK(sent.val[i] == Approx(g[i] * scale).epsilon(1e-6));
    for (int i = 50; i < 60; ++i) CHECK(sent.val[i] == g[i]);
  }
  SECTION("global") {
    c.momentum.clip_scope = ClipScope::kGlobal;
    auto scheme = MakeDgcScheme(SchemeContext{0, 4, 0, 60, layers, 60, 1}, c);
    const SparseVector sent = DriveRound(*scheme, g, 0, 0.0);
    REQUIRE(sent.idx.size() == 60);
    const double scale = bound / (HostNorm(g, 0, 60) + 1e-6);
    CHECK(HostNorm(sent.val, 0, 60) <= bound * (1 + 1e-6));
    for (int i = 0; i < 60; ++i) CHECK(sent.val[i] == Approx(g[i] * scale).epsilon(1e-6));
  }
}

TEST_CASE("DGC at density 1 is SGD without momentum (masking) or momentum SGD (no masking)", "[schemes][dgc]") {
  const LeastSquares problem(200, 50, 2);
  auto opts = MomentumSimOptions(4, 2, 25, MakeLayerTable({{"w1", {5, 5}}, {"w2", {5, 5}}}));  // matrices only
  opts.density = 1.0;
  DgcConfig c = ExactSelection();  // sampling could miss the smallest entries at density 1
  c.momentum.momentum = 0.5;
  auto masked = Simulate(Dgc(c), problem, opts);
  c.momentum.masking = false;
  auto unmasked = Simulate(Dgc(c), problem, opts);
  auto sgd = Simulate(Dense(), problem, opts);
  opts.optimizer.momentum = 0.5;
  auto momentum_sgd = Simulate(Dense(), problem, opts);
  REQUIRE(masked.status.ok());
  REQUIRE(unmasked.status.ok());
  CHECK(masked.replicas_identical);
  CHECK(unmasked.replicas_identical);
  CHECK(RelativeError(masked.replicas[0], sgd.replicas[0]) < 1e-6);
  CHECK(RelativeError(unmasked.replicas[0], momentum_sgd.replicas[0]) < 1e-5);
  CHECK(RelativeError(unmasked.replicas[0], sgd.replicas[0]) > 1e-2);  // the two differ
}

TEST_CASE("DGC sends one-dimensional layers whole with plain momentum", "[schemes][dgc]") {
  const LeastSquares problem(200, 50, 2);
  auto opts = MomentumSimOptions(4, 2, 25, MakeLayerTable({{"b1", {25}}, {"b2", {25}}}));
  opts.density = 0.1;  // irrelevant: nothing is compressed
  DgcConfig c;
  c.momentum.momentum = 0.5;
  auto dgc = Simulate(Dgc(c), problem, opts);  // masking on, but biases keep their momentum (DGC's code)
  opts.optimizer.momentum = 0.5;
  auto momentum_sgd = Simulate(Dense(), problem, opts);
  REQUIRE(dgc.status.ok());
  CHECK(dgc.replicas_identical);
  CHECK(dgc.selected[3] == 50);
  CHECK(RelativeError(dgc.replicas[0], momentum_sgd.replicas[0]) < 1e-5);
}

TEST_CASE("DGC converges to the least-squares optimum", "[schemes][dgc][convergence]") {
  auto opts = MomentumSimOptions(GENERATE(1u, 4u, 8u), 2, 600, Layers50());
  opts.density = 0.1;  // matrices at about 0.1 (k per shard = 2), biases whole: 0.18 of d = 50
  DgcConfig c;
  c.momentum.momentum = 0.5;
  ExpectConvergesOnLeastSquares(Dgc(c), opts, 1e-3);
}

TEST_CASE("DGC converges on logistic regression", "[schemes][dgc][convergence][long]") {
  auto opts = MomentumSimOptions(GENERATE(1u, 4u, 8u), 2, 1500, Layers30());
  opts.density = 0.1;  // one entry of each matrix, biases whole: 7 of d = 30
  opts.optimizer.lr.base_lr = 1.0;
  DgcConfig c;
  c.momentum.momentum = 0.0;
  ExpectConvergesOnLogistic(Dgc(c), opts, 1e-3);
}

TEST_CASE("DGC bytes per phase follow the documented formula", "[schemes][dgc][bytes]") {
  const std::uint32_t p = 3;
  const LeastSquares problem(100, 50, 1);
  auto opts = MomentumSimOptions(p, 2, 2, Layers50());
  opts.density = 0.2;  // k = 5 per shard range of 25 entries: δ = 0.2 on both
  auto r = Simulate(Dgc(ExactSelection()), problem, opts);
  REQUIRE(r.status.ok());
  // Round 0: w = 0, v = u = g. Up: ⌈δ n_l⌉ entries per matrix plus every bias entry, 8 bytes each.
  CHECK(r.traffic[0].bytes_up == 8 * (5 + 4 + 5));
  std::set<std::uint32_t> uni;
  std::vector<float> g;
  for (std::uint32_t w = 0; w < p; ++w) {
    problem.Gradient(std::vector<float>(50, 0.0f), w, p, 0, g);
    for (auto i : TopKIndices(g, 0, 25, 5)) uni.insert(i);
    for (auto i : TopKIndices(g, 25, 45, 4)) uni.insert(i);
    for (std::uint32_t i = 45; i < 50; ++i) uni.insert(i);
  }
  CHECK(r.traffic[0].bytes_down == 8 * uni.size());  // the union, 8 bytes per entry
  auto warm = Simulate(Dgc(ExactSelection(), /*warmup_rounds=*/1), problem, opts);
  REQUIRE(warm.status.ok());
  CHECK(warm.traffic[0].bytes_up == 4 * 50);  // dense round: 4 bytes per value
  CHECK(warm.traffic[0].bytes_down == 4 * 50);
  CHECK(warm.traffic[1].bytes_up == 8 * (5 + 4 + 5));
}

TEST_CASE("DGC: a worker with a non-finite gradient skips, replicas stay identical", "[schemes][dgc][nan]") {
  auto opts = MomentumSimOptions(4, 2, 30, Layers50());
  opts.density = 0.2;
  opts.tamper = PoisonGradients({{1, 7, 3, kNaN}, {2, 9, 13, kInf}});  // both in shard 0
  ExpectSkipsNonFinite(Dgc(), LeastSquares(200, 50, 3), opts);
}

TEST_CASE("DGC state round-trips through Save/Restore, bad state is rejected", "[schemes][dgc][state]") {
  const LayerTable layers = MakeLayerTable({{"w", {10, 5}}, {"b", {10}}});
  const SchemeContext ctx{1, 4, 0, 60, layers, 6, 9};
  auto a = MakeDgcScheme(ctx, DgcConfig{});
  std::mt19937_64 rng(2);
  for (std::uint64_t round = 0; round < 3; ++round) DriveRound(*a, Gaussian(60, rng), round, 0.2 * round);
  auto b = MakeDgcScheme(ctx, DgcConfig{});
  REQUIRE(b->RestoreState(a->SaveState()).ok());
  CHECK(b->SaveState().arrays == a->SaveState().arrays);
  for (std::uint64_t round = 3; round < 6; ++round) {
    const auto g = Gaussian(60, rng);
    CHECK(DriveRound(*a, g, round, 0.2 * round) == DriveRound(*b, g, round, 0.2 * round));
  }
  CHECK(b->SaveState().arrays == a->SaveState().arrays);
  SchemeState missing = a->SaveState();
  missing.arrays.erase("momentum");
  CHECK(b->RestoreState(missing).code() == absl::StatusCode::kInvalidArgument);
  SchemeState short_v = a->SaveState();
  short_v.arrays["velocity"].pop_back();
  CHECK(b->RestoreState(short_v).code() == absl::StatusCode::kInvalidArgument);
  CHECK(b->SaveState().arrays == a->SaveState().arrays);  // untouched by the failed restores
}

TEST_CASE("DGC config errors name the key", "[schemes][dgc][config]") {
  DgcConfig c;
  CHECK(c.Validate("scheme.dgc").ok());
  c.sample_ratio = 0.0;
  CHECK_THAT(std::string(c.Validate("scheme.dgc").message()), Catch::StartsWith("scheme.dgc.sample_ratio"));
  CHECK_THAT(ConfigError("{momentum: 1.0}"), Catch::StartsWith("scheme.dgc.momentum"));
  CHECK_THAT(ConfigError("{compress_upper_bound: 0.9}"), Catch::StartsWith("scheme.dgc.compress_upper_bound"));
  CHECK_THAT(ConfigError("{compress_lower_bound: 0}"), Catch::StartsWith("scheme.dgc.compress_lower_bound"));
  CHECK_THAT(ConfigError("{max_adaptation_iters: -1}"), Catch::StartsWith("scheme.dgc.max_adaptation_iters"));
  CHECK_THAT(ConfigError("{clip_norm: -1}"), Catch::StartsWith("scheme.dgc.clip_norm"));
  CHECK_THAT(ConfigError("{clip_scope: tensor}"), Catch::StartsWith("scheme.dgc.clip_scope"));
  CHECK_THAT(ConfigError("{warmup_densities: [0.5]}"), Catch::StartsWith("scheme.dgc.warmup_densities"));
  CHECK_THAT(ConfigError("{warmup_epochs: 1, warmup_densities: [1.5]}"),
             Catch::StartsWith("scheme.dgc.warmup_densities[0]"));
  CHECK_THAT(ConfigError("{ratio: 0.1}"), Catch::StartsWith("scheme.dgc: unknown key 'ratio'"));
  CHECK_THAT(ConfigError("{warmup: 3}"), Catch::StartsWith("scheme.dgc.warmup: '3' has no unit"));
  CHECK_THAT(ConfigError("{warmup: [4 epochs, 150%]}"), Catch::StartsWith("scheme.dgc.warmup[1]"));
  CHECK_THAT(ConfigError("{warmup_stages: 0}"), Catch::StartsWith("scheme.dgc.warmup_stages"));
  CHECK_THAT(ConfigError("{warmup: 2 epochs, warmup_epochs: 2}"),
             Catch::StartsWith("scheme.dgc.warmup_epochs: give warmup"));
  CHECK(ConfigError("{warmup_stages: 2, warmup_epochs: 2}") ==
        "scheme.dgc.warmup_epochs: give warmup and warmup_stages, or warmup_epochs, not both");
  CHECK(ConfigError("{warmup_epochs: 65}") ==
        "scheme.dgc.warmup_epochs must be at most 64 (a stage per epoch), got 65");
  CHECK_THAT(ConfigError("{warmup: 2 epochs, warmup_stages: 3, warmup_densities: [0.5, 0.1]}"),
             Catch::StartsWith("scheme.dgc.warmup_densities has 2 entries"));
  auto job = ParseJobSpec(
      "scheme: {name: dgc, density: 0.001, dgc: {momentum: 0.8, nesterov: true, "
      "warmup_epochs: 5, clip_norm: 2.5, clip_scope: global}}\n",
      "t.yaml", {});
  REQUIRE(job.ok());
  CHECK_FALSE(job->scheme.global_momentum);
  CHECK(std::string(job->scheme.make(SchemeContext{0, 4, 0, 100, {}, 1, 1})->name()) == "dgc");
  // The round-1 key warmup_epochs: W reads as warmup: W epochs in W stages.
  DgcConfig old_key;
  ConfigReader section(YAML::Load("{warmup_epochs: 5}"), "scheme.dgc");
  REQUIRE(old_key.Read(section).ok());
  CHECK(old_key.warmup.Text() == "5 epochs");
  CHECK(old_key.warmup_stages == 5);
}

TEST_CASE("DGC with density 0.001 compresses >= 400x on Gaussian layers after warm-up", "[schemes][dgc]") {
  const std::size_t d = 200000;
  const LayerTable layers = MakeLayerTable({{"w", {400, 500}}});
  const JobClock clock{2, 0};  // two rounds per epoch, so the warm-up is rounds 0-7
  auto scheme = MakeDgcScheme(SchemeContext{0, 8, 0, d, layers, 200, 4, 0, clock}, DgcConfig{});
  std::mt19937_64 rng(21);
  for (std::uint64_t round = 0; round < 12; ++round) {
    const double epoch = round * 0.5;  // compressed at δ from epoch 4 on
    const SparseVector sent = DriveRound(*scheme, Gaussian(d, rng), round, epoch);
    const double density = static_cast<double>(sent.idx.size()) / d;
    const double scheduled = DgcDensity(DgcConfig{}, 0.001, round, clock);
    INFO("round " << round << ": density " << density << ", scheduled " << scheduled);
    CHECK(density >= 0.8 * scheduled - 1.0 / d);
    CHECK(density <= 1.3 * scheduled + 1.0 / d);
    if (epoch >= 4) CHECK(density <= 0.0025);
  }
}
