// ScaleCom (PS mode): CLT-k with the cyclic leader, the low-pass-filtered memory and end-to-end
// behaviour through the in-process aggregator. References are naive host loops.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "schemes/dense.h"
#include "schemes/reduce.h"
#include "schemes/registry.h"
#include "schemes/scalecom.h"
#include "schemes/topk_ef.h"
#include "support/scheme_checks.h"
#include "support/simulation.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

SchemeFactory ScaleCom(double beta = 1.0) {
  return [beta](SchemeContext ctx) { return MakeScaleComScheme(std::move(ctx), ScaleComConfig{beta}); };
}

SimOptions Options(std::uint32_t workers, std::uint32_t shards, std::uint64_t rounds) {
  SimOptions o;
  o.workers = workers;
  o.shards = shards;
  o.rounds = rounds;
  o.optimizer.lr.base_lr = 0.05;
  o.optimizer.momentum = 0.5;
  return o;
}

// One round of every worker's scheme through a Reducer, phase by phase, as the aggregator runs it.
struct ManualRound {
  std::vector<std::vector<Contribution>> payloads;  // [phase][worker]
  std::vector<PhaseResult> results;                 // [phase]
  std::vector<Aggregate> aggregates;                // [worker]
};

ManualRound RunManual(std::vector<std::unique_ptr<Scheme>>& schemes, std::uint64_t round,
                      const std::vector<std::vector<float>>& grads) {
  std::vector<kernels::DeviceArray<float>> d;
  for (const auto& g : grads) d.emplace_back(g);
  for (std::size_t w = 0; w < schemes.size(); ++w) REQUIRE(schemes[w]->BeginRound({round, 0.0}, d[w].data()).ok());
  Reducer reducer(grads[0].size());
  ManualRound out;
  for (std::uint32_t phase = 0; phase < schemes[0]->NumPhases(); ++phase) {
    const PhaseResult* previous = phase == 0 ? nullptr : &out.results.back();
    std::vector<Contribution> cs;
    std::vector<const Contribution*> ptrs;
    for (auto& s : schemes) {
      auto c = s->Contribute(phase, previous);
      REQUIRE(c.ok());
      CHECK(c->spec == (cs.empty() ? c->spec : cs[0].spec));
      cs.push_back(*c);
    }
    for (const auto& c : cs) ptrs.push_back(&c);
    auto r = reducer.Reduce(cs[0].spec, ptrs, previous);
    REQUIRE(r.ok());
    out.payloads.push_back(cs);
    out.results.push_back(*r);
  }
  for (auto& s : schemes) {
    auto g = s->Finish(out.results.back());
    REQUIRE(g.ok());
    out.aggregates.push_back(*g);
  }
  return out;
}

// Host top-k: |x| descending, then index ascending; returned index-sorted.
std::vector<std::uint32_t> HostTopK(const std::vector<float>& x, std::size_t k) {
  std::vector<std::uint32_t> order;
  for (std::uint32_t i = 0; i < x.size(); ++i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return std::fabs(x[a]) > std::fabs(x[b]); });
  order.resize(std::min(k, order.size()));
  std::sort(order.begin(), order.end());
  return order;
}

std::vector<float> Memory(const Scheme& s) { return s.SaveState().arrays.at("memory"); }

std::vector<std::unique_ptr<Scheme>> Workers(std::uint32_t p, std::uint64_t dim, std::uint64_t k, double beta) {
  std::vector<std::unique_ptr<Scheme>> out;
  for (std::uint32_t w = 0; w < p; ++w) out.push_back(MakeScaleComScheme({w, p, 0, dim, {}, k, 1}, ScaleComConfig{beta}));
  return out;
}

// Gradients that are multiples of 1/8 in [-4, 4]: every sum and mean below is exact in float.
std::vector<std::vector<float>> DyadicGradients(std::uint32_t p, std::size_t dim, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> u(-32, 32);
  std::vector<std::vector<float>> g(p, std::vector<float>(dim));
  for (auto& gw : g) for (auto& v : gw) v = static_cast<float>(u(rng)) / 8.0f;
  return g;
}

}  // namespace

TEST_CASE("ScaleCom: leader t mod P, mean of CLT-k == CLT-k of the mean, memory is p - CLT-k(p)",
          "[schemes][scalecom]") {
  const std::uint32_t p = GENERATE(2u, 3u, 4u);
  const std::size_t dim = 64, k = 6;
  auto schemes = Workers(p, dim, k, 1.0);
  std::vector<std::vector<float>> m(p, std::vector<float>(dim, 0.0f));
  std::mt19937_64 rng(2);
  for (std::uint64_t round = 0; round < 2 * p + 1; ++round) {
    const auto g = DyadicGradients(p, dim, rng);
    const auto r = RunManual(schemes, round, g);
    std::vector<std::vector<float>> pw(p);
    std::vector<float> mean(dim, 0.0f);
    for (std::uint32_t w = 0; w < p; ++w) {
      pw[w] = m[w];
      for (std::size_t i = 0; i < dim; ++i) pw[w][i] += g[w][i];
      for (std::size_t i = 0; i < dim; ++i) mean[i] += pw[w][i];
    }
    for (auto& v : mean) v /= static_cast<float>(p);
    const std::uint32_t leader = round % p;
    const auto indices = HostTopK(pw[leader], k);
    for (std::uint32_t w = 0; w < p; ++w) {
      CHECK(r.payloads[0][w].spec.leader == leader);
      const auto& set = std::get<IndexSet>(*r.payloads[0][w].payload);
      CHECK(set.idx.size() == (w == leader ? k : 0));
    }
    CHECK(std::get<IndexSet>(r.results[0].value).idx == indices);
    SparseVector clt_of_mean{dim, indices, {}}, mean_of_clt{dim, indices, std::vector<float>(k, 0.0f)};
    for (std::size_t j = 0; j < k; ++j) {
      clt_of_mean.val.push_back(mean[indices[j]]);
      for (std::uint32_t w = 0; w < p; ++w) mean_of_clt.val[j] += pw[w][indices[j]] / static_cast<float>(p);
    }
    if ((p & (p - 1)) == 0) CHECK(clt_of_mean == mean_of_clt);  // exact: dividing by 2^j is exact
    for (const auto& agg : r.aggregates) CHECK(std::get<SparseVector>(agg) == clt_of_mean);
    for (std::uint32_t w = 0; w < p; ++w) {
      m[w] = pw[w];
      for (auto i : indices) m[w][i] = 0.0f;
      CHECK(Memory(*schemes[w]) == m[w]);  // β = 1: standard error feedback, bitwise
    }
  }
}

TEST_CASE("ScaleCom with beta < 1 low-pass filters the memory elementwise", "[schemes][scalecom]") {
  const double beta = GENERATE(0.5, 0.1);
  const std::uint32_t p = 3;
  const std::size_t dim = 40, k = 4;
  auto schemes = Workers(p, dim, k, beta);
  std::vector<std::vector<float>> m(p, std::vector<float>(dim, 0.0f));
  std::mt19937_64 rng(8);
  for (std::uint64_t round = 0; round < 6; ++round) {
    const auto g = DyadicGradients(p, dim, rng);
    const auto r = RunManual(schemes, round, g);
    const auto& indices = std::get<IndexSet>(r.results[0].value).idx;
    for (std::uint32_t w = 0; w < p; ++w) {
      std::vector<float> resid(dim);
      for (std::size_t i = 0; i < dim; ++i) resid[i] = m[w][i] + g[w][i];
      for (auto i : indices) resid[i] = 0.0f;
      const auto got = Memory(*schemes[w]);
      for (std::size_t i = 0; i < dim; ++i) {
        const double want = (1.0 - beta) * m[w][i] + beta * resid[i];
        CHECK(got[i] == Approx(want).margin(1e-5));
      }
      m[w] = got;
    }
  }
}

TEST_CASE("ScaleCom with one worker equals top-k+EF", "[schemes][scalecom]") {
  const LeastSquares problem(200, 40, 6);
  auto opts = Options(1, 2, 60);
  opts.density = 0.1;
  auto s = Simulate(ScaleCom(), problem, opts);
  auto t = Simulate([](SchemeContext ctx) { return MakeTopKEfScheme(std::move(ctx)); }, problem, opts);
  REQUIRE(s.status.ok());
  REQUIRE(t.status.ok());
  CHECK(s.replicas[0] == t.replicas[0]);
}

TEST_CASE("ScaleCom converges to the least-squares optimum", "[schemes][scalecom][convergence]") {
  const std::uint32_t p = GENERATE(1u, 4u, 8u);
  const LeastSquares problem(400, 50, 9);
  auto opts = Options(p, 2, 400);
  opts.density = 0.1;
  UseCosineSchedule(opts);
  ExpectConverges(ScaleCom(), problem, opts, problem.optimum(), 1e-2, p);
}

TEST_CASE("ScaleCom converges on logistic regression", "[schemes][scalecom][convergence]") {
  const std::uint32_t p = GENERATE(1u, 4u, 8u);
  const Logistic problem(400, 30, 0.05, 4);
  const auto optimum = problem.ReferenceOptimum();
  auto opts = Options(p, 1, 600);
  opts.density = 0.2;
  opts.optimizer.lr.base_lr = 1.0;
  opts.optimizer.momentum = 0.0;
  UseCosineSchedule(opts);
  ExpectConverges(ScaleCom(), problem, opts, optimum, 1e-2, p);
}

TEST_CASE("ScaleCom at density 1 equals dense", "[schemes][scalecom]") {
  const LeastSquares problem(200, 30, 2);
  auto opts = Options(4, 2, 20);
  opts.density = 1.0;
  auto s = Simulate(ScaleCom(), problem, opts);
  auto dense = Simulate([](SchemeContext ctx) { return MakeDenseScheme(std::move(ctx)); }, problem, opts);
  REQUIRE(s.status.ok());
  REQUIRE(dense.status.ok());
  CHECK(s.replicas_identical);
  CHECK(RelativeError(s.replicas[0], dense.replicas[0]) < 1e-6);
}

TEST_CASE("ScaleCom bytes: 4k from the leader, 4k per worker, independent of P", "[schemes][scalecom][bytes]") {
  const std::uint32_t p = GENERATE(1u, 2u, 4u, 8u);
  const LeastSquares problem(100, 1000, 1);
  auto opts = Options(p, 2, 2 * p + 2);
  opts.density = 0.01;  // k = 5 per shard, 2 shards
  auto r = Simulate(ScaleCom(), problem, opts);
  REQUIRE(r.status.ok());
  for (std::uint64_t round = 0; round < r.traffic.size(); ++round) {
    const bool leader = round % p == 0;  // worker 0's traffic
    CHECK(r.traffic[round].bytes_up == 2 * ((leader ? 4 * 5 : 0) + 4 * 5));
    CHECK(r.traffic[round].bytes_down == 2 * (4 * 5 + 8 * 5));  // the index set, then k (index, sum) pairs
    CHECK(r.selected[round] == 2 * 5);
  }
}

TEST_CASE("ScaleCom warm-up rounds are dense; the leader schedule counts them", "[schemes][scalecom][warmup]") {
  const LeastSquares problem(100, 1000, 1);
  auto opts = Options(2, 1, 8);
  opts.density = 0.01;  // k = 10
  auto r = Simulate([](SchemeContext ctx) {
    ctx.warmup_rounds = 3;
    return MakeScaleComScheme(std::move(ctx));
  }, problem, opts);
  REQUIRE(r.status.ok());
  CHECK(r.replicas_identical);
  for (std::uint64_t round = 0; round < 8; ++round) {
    const std::uint64_t want_up = round < 3 ? 4 * 1000 : (round % 2 == 0 ? 4 * 10 : 0) + 4 * 10;
    CHECK(r.traffic[round].bytes_up == want_up);
  }
}

TEST_CASE("ScaleCom: a skipped leader or worker leaves replicas identical", "[schemes][scalecom][nan]") {
  const LeastSquares problem(200, 40, 3);
  auto opts = Options(4, 2, 30);
  opts.density = 0.2;
  opts.tamper = [](std::uint32_t worker, std::uint64_t round, std::vector<float>& g) {
    if (worker == 1 && round == 5) g[3] = std::numeric_limits<float>::quiet_NaN();  // the leader of round 5
    if (worker == 2 && round == 9) g[15] = std::numeric_limits<float>::infinity();  // not the leader (1)
  };
  auto r = Simulate(ScaleCom(), problem, opts);
  REQUIRE(r.status.ok());
  CHECK(r.skipped_rounds == 2);
  CHECK(r.replicas_identical);
  CHECK(r.traffic[5].bytes_down == 4 * 4 + 8 * 4);  // shard 0: no leader set, G = 0; shard 1 as usual
  CHECK(r.traffic[9].bytes_down == 2 * (4 * 4 + 8 * 4));  // k = 4 per shard
  for (float v : r.replicas[0]) REQUIRE(std::isfinite(v));
}

TEST_CASE("ScaleCom state round-trips; bad state is InvalidArgument", "[schemes][scalecom][state]") {
  auto one = Workers(1, 50, 4, 0.5);
  std::mt19937_64 rng(5);
  for (std::uint64_t round = 0; round < 3; ++round) RunManual(one, round, DyadicGradients(1, 50, rng));
  auto other = Workers(1, 50, 4, 0.5);
  const SchemeState saved = one[0]->SaveState();
  REQUIRE(other[0]->RestoreState(saved).ok());
  CHECK(other[0]->SaveState().arrays == saved.arrays);
  const auto g = DyadicGradients(1, 50, rng);
  const auto r1 = RunManual(one, 3, g);
  const auto r2 = RunManual(other, 3, g);
  CHECK(std::get<DenseValues>(*r1.payloads[1][0].payload) == std::get<DenseValues>(*r2.payloads[1][0].payload));
  CHECK(Memory(*one[0]) == Memory(*other[0]));
  CHECK(other[0]->RestoreState(SchemeState{}).code() == absl::StatusCode::kInvalidArgument);
  SchemeState long_state{{{"memory", std::vector<float>(51)}}, {}};
  CHECK(other[0]->RestoreState(long_state).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("ScaleCom config: beta is read and checked, errors name the key", "[schemes][scalecom][config]") {
  YAML::Node spec = YAML::Load("{name: scalecom, density: 0.05, scalecom: {beta: 0.25}}");
  ConfigReader reader(spec, "scheme");
  auto bound = ParseSchemeSection(reader);
  REQUIRE(bound.ok());
  CHECK(bound->global_momentum);
  CHECK(std::string(bound->make(SchemeContext{0, 2, 0, 10, {}, 1, 0})->name()) == "scalecom");
  for (const char* text : {"{beta: 0}", "{beta: 1.5}", "{beta: -0.1}"}) {
    ScaleComConfig config;
    ConfigReader r(YAML::Load(text), "scheme.scalecom");
    const absl::Status st = config.Read(r);
    CHECK(st.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(st.message()), Catch::Contains("scheme.scalecom.beta"));
  }
  ScaleComConfig config;
  ConfigReader unknown(YAML::Load("{betta: 0.5}"), "scheme.scalecom");
  CHECK_THAT(std::string(config.Read(unknown).message()), Catch::Contains("betta"));
  ConfigReader good(YAML::Load("{beta: 0.5}"), "scheme.scalecom");
  REQUIRE(config.Read(good).ok());
  CHECK(config.beta == 0.5);
}
