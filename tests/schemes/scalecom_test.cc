// ScaleCom (PS mode): CLT-k with the cyclic leader, the low-pass-filtered memory and end-to-end
// behaviour through the in-process aggregator. References are naive host loops.
#include "schemes/scalecom.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <catch2/catch.hpp>

#include "engine/reduce.h"
#include "schemes/registry.h"
#include "schemes/topk_ef.h"
#include "support/scheme_checks.h"
#include "support/simulation.h"
#include "support/sketch_schemes.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

SchemeFactory ScaleCom(double beta = 1.0) {
  return [beta](SchemeContext ctx) { return MakeScaleComScheme(std::move(ctx), ScaleComConfig{beta}); };
}

std::vector<float> Memory(const Scheme& s) { return s.SaveState().arrays.at("memory"); }

std::vector<std::unique_ptr<Scheme>> Workers(std::uint32_t p, std::uint64_t dim, std::uint64_t k, double beta) {
  std::vector<std::unique_ptr<Scheme>> out;
  for (std::uint32_t w = 0; w < p; ++w)
    out.push_back(MakeScaleComScheme({w, p, 0, dim, {}, k, 1}, ScaleComConfig{beta}));
  return out;
}

// Gradients that are multiples of 1/8 in [-4, 4]: every sum and mean below is exact in float.
std::vector<std::vector<float>> DyadicGradients(std::uint32_t p, std::size_t dim, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> u(-32, 32);
  std::vector<std::vector<float>> g(p, std::vector<float>(dim));
  for (auto& gw : g)
    for (auto& v : gw) v = static_cast<float>(u(rng)) / 8.0f;
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
    const auto r = RequireManualRound(schemes, round, g);
    std::vector<std::vector<float>> pw(p);
    std::vector<float> mean(dim, 0.0f);
    for (std::uint32_t w = 0; w < p; ++w) {
      pw[w] = m[w];
      for (std::size_t i = 0; i < dim; ++i) pw[w][i] += g[w][i];
      for (std::size_t i = 0; i < dim; ++i) mean[i] += pw[w][i];
    }
    for (auto& v : mean) v /= static_cast<float>(p);
    const std::uint32_t leader = round % p;
    const auto indices = NaiveTopKSorted(pw[leader], k);
    CHECK(r.specs[0].leader == leader);  // every worker's spec (RequireManualRound: they agree)
    for (std::uint32_t w = 0; w < p; ++w) {
      const auto& set = std::get<IndexSet>(*r.payloads[0][w]);
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
    const auto r = RequireManualRound(schemes, round, g);
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
  auto opts = SchemeOptions(1, 2, 60);
  opts.density = 0.1;
  ExpectMatches(
      LeastSquares(200, 40, 6), ScaleCom(), [](SchemeContext ctx) { return MakeTopKEfScheme(std::move(ctx)); }, opts,
      /*tolerance=*/0.0);
}

TEST_CASE("ScaleCom converges to the least-squares optimum", "[schemes][scalecom][convergence][long]") {
  auto opts = SchemeOptions(GENERATE(1u, 4u, 8u), 2, 400);
  opts.density = 0.1;
  ExpectConvergesOnLeastSquares(ScaleCom(), opts, 1e-2);
}

TEST_CASE("ScaleCom converges on logistic regression", "[schemes][scalecom][convergence]") {
  auto opts = SchemeOptions(GENERATE(1u, 4u, 8u), 1, 600, /*lr=*/1.0, /*momentum=*/0.0);
  opts.density = 0.2;
  ExpectConvergesOnLogistic(ScaleCom(), opts, 1e-2);
}

TEST_CASE("ScaleCom at density 1 equals dense", "[schemes][scalecom]") {
  auto opts = SchemeOptions(4, 2, 20);
  opts.density = 1.0;
  ExpectMatches(LeastSquares(200, 30, 2), ScaleCom(), Dense(), opts, 1e-6);
}

TEST_CASE("ScaleCom bytes: 4k from the leader, 4k per worker, independent of P", "[schemes][scalecom][bytes]") {
  const std::uint32_t p = GENERATE(1u, 2u, 4u, 8u);
  const LeastSquares problem(100, 1000, 1);
  auto opts = SchemeOptions(p, 2, 2 * p + 2);
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

TEST_CASE("ScaleCom warm-up rounds are dense, the leader schedule counts them", "[schemes][scalecom][warmup]") {
  const LeastSquares problem(100, 1000, 1);
  auto opts = SchemeOptions(2, 1, 8);
  opts.density = 0.01;  // k = 10
  auto r = Simulate(
      [](SchemeContext ctx) {
        ctx.warmup_rounds = 3;
        return MakeScaleComScheme(std::move(ctx));
      },
      problem, opts);
  REQUIRE(r.status.ok());
  CHECK(r.replicas_identical);
  for (std::uint64_t round = 0; round < 8; ++round) {
    const std::uint64_t want_up = round < 3 ? 4 * 1000 : (round % 2 == 0 ? 4 * 10 : 0) + 4 * 10;
    CHECK(r.traffic[round].bytes_up == want_up);
  }
}

TEST_CASE("ScaleCom: a skipped leader or worker leaves replicas identical", "[schemes][scalecom][nan]") {
  auto opts = SchemeOptions(4, 2, 30);
  opts.density = 0.2;
  // Worker 1 leads round 5; worker 2 does not lead round 9 (worker 1 does).
  opts.tamper = PoisonGradients({{1, 5, 3, kNaN}, {2, 9, 15, kInf}});
  const auto r = ExpectSkipsNonFinite(ScaleCom(), LeastSquares(200, 40, 3), opts);
  CHECK(r.traffic[5].bytes_down == 4 * 4 + 8 * 4);        // shard 0: no leader set, G = 0; shard 1 as usual
  CHECK(r.traffic[9].bytes_down == 2 * (4 * 4 + 8 * 4));  // k = 4 per shard
}

TEST_CASE("ScaleCom state round-trips, bad state is InvalidArgument", "[schemes][scalecom][state]") {
  auto one = Workers(1, 50, 4, 0.5);
  std::mt19937_64 rng(5);
  for (std::uint64_t round = 0; round < 3; ++round) RequireManualRound(one, round, DyadicGradients(1, 50, rng));
  auto other = Workers(1, 50, 4, 0.5);
  const SchemeState saved = one[0]->SaveState();
  REQUIRE(other[0]->RestoreState(saved).ok());
  CHECK(other[0]->SaveState().arrays == saved.arrays);
  const auto g = DyadicGradients(1, 50, rng);
  const auto r1 = RequireManualRound(one, 3, g);
  const auto r2 = RequireManualRound(other, 3, g);
  CHECK(std::get<DenseValues>(*r1.payloads[1][0]) == std::get<DenseValues>(*r2.payloads[1][0]));
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
