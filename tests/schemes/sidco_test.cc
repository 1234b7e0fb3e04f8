// SIDCo: threshold selection with error feedback, the achieved density against the target, and
// end-to-end behaviour through the in-process aggregator.
#include "schemes/sidco.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include <catch2/catch.hpp>

#include "bench/synthetic/distributions.h"
#include "engine/reduce.h"
#include "schemes/registry.h"
#include "support/scheme_checks.h"
#include "support/simulation.h"
#include "support/sketch_schemes.h"

using namespace sketchps;
using namespace sketchps::testing;
using namespace sketchps::synthetic;

namespace {

SchemeFactory Sidco(SidcoConfig config = {}) {
  return [config](SchemeContext ctx) { return MakeSidcoScheme(std::move(ctx), config); };
}

// One round of every worker's scheme (a single phase) through a Reducer, as the aggregator runs it.
struct SentRound {
  std::vector<SparseVector> sent;  // per worker (empty in dense warm-up rounds)
  PhaseResult result;
};

SentRound RunManual(std::vector<std::unique_ptr<Scheme>>& schemes, std::uint64_t round,
                    const std::vector<std::vector<float>>& grads) {
  auto r = RequireManualRound(schemes, round, grads);
  REQUIRE(r.results.size() == 1);
  SentRound out{{}, r.results[0]};
  for (const auto& payload : r.payloads[0]) {
    REQUIRE(payload.has_value());
    const auto* sparse = std::get_if<SparseVector>(&*payload);  // dense in warm-up rounds
    out.sent.push_back(sparse ? *sparse : SparseVector{});
  }
  return out;
}

std::vector<std::unique_ptr<Scheme>> One(std::uint64_t dim, std::uint64_t k, const SidcoConfig& config = {}) {
  std::vector<std::unique_ptr<Scheme>> out;
  out.push_back(MakeSidcoScheme({0, 1, 0, dim, {}, k, 1}, config));
  return out;
}

std::vector<float> Residual(const Scheme& s) { return s.SaveState().arrays.at("residual"); }

SidcoConfig Variant(const char* name) {
  SidcoConfig c;
  c.variant = name;
  return c;
}

}  // namespace

TEST_CASE("SIDCo sends exactly {|a| > eta} and conserves a exactly", "[schemes][sidco][ef]") {
  const SidcoConfig config = Variant(GENERATE("exponential", "gpareto", "gamma_gpareto"));
  const std::size_t dim = 4000, k = 40;
  auto schemes = One(dim, k, config);
  auto reference = kernels::SidcoEstimator::Create(config.ToOptions(static_cast<double>(k) / dim));
  REQUIRE(reference.ok());
  kernels::Scratch scratch;
  const kernels::Exec exec{nullptr, &scratch};
  std::vector<float> e(dim, 0.0f);
  for (std::uint64_t round = 0; round < 12; ++round) {
    const auto g = SignedSamples(Shape::kStudentT3, dim, 100 + round);
    std::vector<float> a(dim);
    for (std::size_t i = 0; i < dim; ++i) a[i] = e[i] + g[i];
    const auto r = RunManual(schemes, round, {g});
    const kernels::DeviceArray<float> d_a(a);
    auto est = reference->Estimate(d_a.data(), dim, exec);
    REQUIRE(est.ok());
    SparseVector want{dim, {}, {}};
    for (std::uint32_t i = 0; i < dim; ++i) {
      if (std::fabs(a[i]) > est->threshold) {
        want.idx.push_back(i);
        want.val.push_back(a[i]);
      }
    }
    REQUIRE(reference->Record(want.idx.size(), dim).ok());
    CHECK(r.sent[0] == want);
    const auto residual = Residual(*schemes[0]);
    std::vector<float> total = residual;
    for (std::size_t j = 0; j < want.idx.size(); ++j) {
      CHECK(residual[want.idx[j]] == 0.0f);
      total[want.idx[j]] += want.val[j];
    }
    CHECK(total == a);  // values moved, not recomputed
    e = residual;
  }
  CHECK(schemes[0]->SaveState().scalars.at("sidco.stages") == reference->state().stages);
}

TEST_CASE("SIDCo achieved density approaches the target on heavy-tailed gradients", "[schemes][sidco][density]") {
  // Fresh synthetic gradients every round, error feedback on (a = e + g), adaptive stage count. The
  // default variant (E) and GP; SIDCo-P settles at about 0.6 on Student-t3 at 0.001 (between M = 1 and
  // M = 2, no integer stage count fits), so it is exercised on least squares below.
  struct Case {
    const char* variant;
    Shape shape;
    double density;
  };
  const Case c =
      GENERATE(Case{"exponential", Shape::kStudentT3, 0.01}, Case{"exponential", Shape::kStudentT3, 0.001},
               Case{"exponential", Shape::kLaplace, 0.01}, Case{"gamma_gpareto", Shape::kStudentT3, 0.01},
               Case{"gamma_gpareto", Shape::kStudentT3, 0.001}, Case{"gamma_gpareto", Shape::kLaplace, 0.01});
  const std::size_t dim = 20000;
  const auto k = static_cast<std::size_t>(c.density * dim);
  auto schemes = One(dim, k, Variant(c.variant));
  double sum = 0;
  const int rounds = 100, measured = 50;  // the first 10 adaptation windows (5 rounds each) are not measured
  for (int round = 0; round < rounds; ++round) {
    const auto r = RunManual(schemes, round, {SignedSamples(c.shape, dim, 7 * round + 1)});
    if (round >= rounds - measured) sum += static_cast<double>(r.sent[0].idx.size());
  }
  const double ratio = sum / measured / static_cast<double>(k);
  INFO(c.variant << " on " << ShapeName(c.shape) << " at " << c.density << ": achieved / target " << ratio
                 << ", stages " << schemes[0]->SaveState().scalars.at("sidco.stages"));
  CHECK(ratio > 0.75);
  CHECK(ratio < 1.25);
}

TEST_CASE("SIDCo achieved density tracks the target while training least squares", "[schemes][sidco][density]") {
  // Minibatch least-squares gradients are close to Gaussian: SIDCo-P fits them (E settles at about
  // 1.2-1.3 of the target there, at the edge of its adaptation tolerance).
  const LeastSquares problem(2000, 1000, 3, /*batch=*/16);
  auto opts = SchemeOptions(4, 1, 200);
  opts.optimizer.lr.base_lr = 0.01;
  opts.density = 0.01;  // k = 10
  auto r = Simulate(Sidco(Variant("gpareto")), problem, opts);
  REQUIRE(r.status.ok());
  CHECK(r.replicas_identical);
  double sum = 0;
  for (std::size_t round = 100; round < r.selected.size(); ++round) sum += static_cast<double>(r.selected[round]);
  const double ratio = sum / static_cast<double>(r.selected.size() - 100) / 10.0;
  INFO("achieved / target " << ratio);
  CHECK(ratio > 0.75);
  CHECK(ratio < 1.25);
}

TEST_CASE("SIDCo converges to the least-squares optimum", "[schemes][sidco][convergence][long]") {
  auto opts = SchemeOptions(GENERATE(1u, 4u, 8u), 2, 400);
  opts.density = 0.1;
  ExpectConvergesOnLeastSquares(Sidco(), opts, 1e-2);
}

TEST_CASE("SIDCo converges on logistic regression", "[schemes][sidco][convergence]") {
  auto opts = SchemeOptions(GENERATE(1u, 4u, 8u), 1, 600, /*lr=*/1.0, /*momentum=*/0.0);
  opts.density = 0.2;
  ExpectConvergesOnLogistic(Sidco(), opts, 1e-2);
}

TEST_CASE("SIDCo at density 1 equals dense", "[schemes][sidco]") {
  auto opts = SchemeOptions(4, 2, 20);
  opts.density = 1.0;
  ExpectMatches(LeastSquares(200, 30, 2), Sidco(), Dense(), opts, 1e-6);
}

TEST_CASE("SIDCo bytes: 8 per selected entry up, 8 per union entry down", "[schemes][sidco][bytes]") {
  const std::uint32_t p = 3;
  const std::size_t dim = 3000;
  std::vector<std::unique_ptr<Scheme>> schemes;
  for (std::uint32_t w = 0; w < p; ++w) schemes.push_back(MakeSidcoScheme({w, p, 0, dim, {}, 30, 1}));
  for (std::uint64_t round = 0; round < 3; ++round) {
    std::vector<std::vector<float>> g;
    for (std::uint32_t w = 0; w < p; ++w) g.push_back(SignedSamples(Shape::kLaplace, dim, 10 * round + w));
    const auto r = RunManual(schemes, round, g);
    std::set<std::uint32_t> uni;
    for (std::uint32_t w = 0; w < p; ++w) {
      CHECK(RawPayloadBytes(r.sent[w]) == 8 * r.sent[w].idx.size());
      CHECK(schemes[w]->selected() == r.sent[w].idx.size());
      uni.insert(r.sent[w].idx.begin(), r.sent[w].idx.end());
    }
    CHECK(RawPayloadBytes(r.result.value) == 8 * uni.size());
  }
  const LeastSquares problem(100, 1000, 1);
  auto opts = SchemeOptions(2, 2, 6);
  opts.density = 0.01;
  auto sim = Simulate(Sidco(), problem, opts);
  REQUIRE(sim.status.ok());
  for (std::size_t round = 0; round < sim.traffic.size(); ++round) {
    CHECK(sim.traffic[round].bytes_up == 8 * sim.selected[round]);
  }
}

TEST_CASE("SIDCo selection is invariant to scaling the gradient by a power of two", "[schemes][sidco]") {
  auto a = One(5000, 25), b = One(5000, 25);
  for (std::uint64_t round = 0; round < 12; ++round) {
    auto g = SignedSamples(Shape::kStudentT3, 5000, round);
    auto g4 = g;
    for (auto& v : g4) v *= 4.0f;
    CHECK(RunManual(a, round, {g}).sent[0].idx == RunManual(b, round, {g4}).sent[0].idx);
  }
}

TEST_CASE("SIDCo: a worker with a non-finite gradient skips, replicas stay identical", "[schemes][sidco][nan]") {
  auto opts = SchemeOptions(4, 2, 30);
  opts.density = 0.2;
  opts.tamper = PoisonGradients({{1, 7, 3, kNaN}, {2, 9, 15, kInf}});
  ExpectSkipsNonFinite(Sidco(), LeastSquares(200, 40, 3), opts);
}

TEST_CASE("SIDCo state (residual and stage adaptation) round-trips", "[schemes][sidco][state]") {
  const std::size_t dim = 5000, k = 5;
  auto a = One(dim, k);
  for (std::uint64_t round = 0; round < 13; ++round) RunManual(a, round, {SignedSamples(Shape::kGaussian, dim, round)});
  const SchemeState saved = a[0]->SaveState();
  CHECK(saved.scalars.at("sidco.windows") == 2);
  CHECK(saved.scalars.at("sidco.window_calls") == 3);
  auto b = One(dim, k);
  REQUIRE(b[0]->RestoreState(saved).ok());
  CHECK(b[0]->SaveState().arrays == saved.arrays);
  CHECK(b[0]->SaveState().scalars == saved.scalars);
  for (std::uint64_t round = 13; round < 40; ++round) {
    const auto g = SignedSamples(Shape::kGaussian, dim, round);
    CHECK(RunManual(a, round, {g}).sent[0] == RunManual(b, round, {g}).sent[0]);
  }
  CHECK(a[0]->SaveState().scalars == b[0]->SaveState().scalars);
}

TEST_CASE("SIDCo warm-up and skipped rounds do not feed the stage adaptation", "[schemes][sidco][warmup]") {
  std::vector<std::unique_ptr<Scheme>> s;
  s.push_back(MakeSidcoScheme({0, 1, 0, 1000, {}, 10, 1, /*warmup_rounds=*/4}));
  for (std::uint64_t round = 0; round < 6; ++round) {
    const auto r = RunManual(s, round, {SignedSamples(Shape::kLaplace, 1000, round)});
    CHECK(s[0]->selected() == (round < 4 ? 1000 : r.sent[0].idx.size()));
  }
  CHECK(s[0]->SaveState().scalars.at("sidco.window_calls") == 2);  // rounds 4 and 5 only
  auto g = SignedSamples(Shape::kLaplace, 1000, 6);
  g[7] = std::numeric_limits<float>::quiet_NaN();
  kernels::DeviceArray<float> d(g);
  REQUIRE(s[0]->BeginRound({6, 0.0}, d.data()).ok());
  CHECK(s[0]->skipped());
  auto c = s[0]->Contribute(0, nullptr);
  REQUIRE(c.ok());
  CHECK(!c->payload.has_value());
  REQUIRE(s[0]->Finish(PhaseResult{SparseVector{1000, {}, {}}, 0}).ok());
  CHECK(s[0]->SaveState().scalars.at("sidco.window_calls") == 2);
}

TEST_CASE("SIDCo rejects bad state with InvalidArgument", "[schemes][sidco][state]") {
  auto s = One(100, 5);
  const SchemeState good = s[0]->SaveState();
  CHECK(s[0]->RestoreState(SchemeState{}).code() == absl::StatusCode::kInvalidArgument);
  auto bad = good;
  bad.arrays["residual"].resize(99);
  CHECK(s[0]->RestoreState(bad).code() == absl::StatusCode::kInvalidArgument);
  for (const char* key : {"sidco.stages", "sidco.windows", "sidco.error_by_stages.2"}) {
    bad = good;
    bad.scalars.erase(key);
    const absl::Status st = s[0]->RestoreState(bad);
    CHECK(st.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(st.message()), Catch::Contains(key));
  }
  bad = good;
  bad.scalars["sidco.stages"] = 99;  // beyond ceil(log2(1 / 0.05)) = 5
  CHECK(s[0]->RestoreState(bad).code() == absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.scalars["sidco.window_calls"] = 1.5;
  CHECK(s[0]->RestoreState(bad).code() == absl::StatusCode::kInvalidArgument);
  CHECK(s[0]->RestoreState(good).ok());
}

TEST_CASE("SIDCo config: fields are read and checked, errors name the key", "[schemes][sidco][config]") {
  YAML::Node spec = YAML::Load("{name: sidco, density: 0.01, sidco: {variant: gpareto, stage_mode: fixed, stages: 2}}");
  ConfigReader reader(spec, "scheme");
  auto bound = ParseSchemeSection(reader);
  REQUIRE(bound.ok());
  CHECK(bound->global_momentum);
  CHECK(std::string(bound->make(SchemeContext{0, 2, 0, 10, {}, 1, 0})->name()) == "sidco");
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"{variant: laplace}", "scheme.sidco.variant"},
      {"{stage_mode: auto}", "scheme.sidco.stage_mode"},
      {"{stages: 0}", "scheme.sidco.stages"},
      {"{first_stage_ratio: 1.0}", "scheme.sidco.first_stage_ratio"},
      {"{per_stage_ratio: 0}", "scheme.sidco.per_stage_ratio"},
      {"{adapt_window: 0}", "scheme.sidco.adapt_window"},
      {"{adapt_window: 5}", "scheme.sidco.adapt_window: '5' has no unit"},
      {"{adapt_tolerance_down: 1.0}", "scheme.sidco.adapt_tolerance_down"},
      {"{adapt_memory: -1}", "scheme.sidco.adapt_memory"},
      {"{gamma_newton_steps: 21}", "scheme.sidco.gamma_newton_steps"},
      {"{stagez: 2}", "stagez"},
  };
  for (const auto& [text, key] : cases) {
    SidcoConfig config;
    ConfigReader r(YAML::Load(text), "scheme.sidco");
    const absl::Status st = config.Read(r);
    INFO(text);
    CHECK(st.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(st.message()), Catch::Contains(key));
  }
  // adapt_window is a span: rounds, epochs or a share of the job; the estimator gets whole calls, >= 1.
  SidcoConfig spans;
  ConfigReader r(YAML::Load("{adapt_window: 1%}"), "scheme.sidco");
  REQUIRE(spans.Read(r).ok());
  CHECK(spans.AdaptWindowCalls({468, 1404}) == 14);
  CHECK(spans.ToOptions(0.01, {468, 1404}).adapt_window == 14);
  CHECK(spans.AdaptWindowCalls({468, 20}) == 1);
  CHECK(SidcoConfig{}.AdaptWindowCalls({468, 1404}) == 5);  // the default, 5 rounds, whatever the job
}
