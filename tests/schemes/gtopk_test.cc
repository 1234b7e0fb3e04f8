// gTop-k (PS mode): the global top-k of the summed local top-k selections, the residual put-back, and
// end-to-end behaviour through the in-process aggregator. References are naive host loops.
#include "schemes/gtopk.h"

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

SchemeFactory GTopK() {
  return [](SchemeContext ctx) { return MakeGTopKScheme(std::move(ctx)); };
}

// One round of every worker's scheme (a single phase) through a Reducer, as the aggregator runs it.
ManualRound RunManual(std::vector<std::unique_ptr<Scheme>>& schemes, std::uint64_t round,
                      const std::vector<std::vector<float>>& grads) {
  auto r = RequireManualRound(schemes, round, grads);
  REQUIRE(r.results.size() == 1);
  return r;
}

std::vector<float> Residual(const Scheme& s) { return s.SaveState().arrays.at("residual"); }

// e_new + a ⊙ (mask_local ∧ mask_global) == a, bitwise .
void CheckResidualInvariant(const std::vector<float>& residual, const std::vector<float>& a,
                            const std::vector<std::uint32_t>& local, const std::vector<std::uint32_t>& global) {
  std::vector<float> total = residual;
  for (auto i : local) {
    if (std::binary_search(global.begin(), global.end(), i)) {
      CHECK(total[i] == 0.0f);
      total[i] = a[i];
    }
  }
  CHECK(total == a);
}

}  // namespace

TEST_CASE("gTop-k keeps the global top-k of the sums, ties go to the smaller index", "[schemes][gtopk]") {
  std::vector<std::unique_ptr<Scheme>> schemes;
  for (std::uint32_t w = 0; w < 2; ++w) schemes.push_back(MakeGTopKScheme({w, 2, 0, 8, {}, 2, 1}));
  // Local top-2: worker 0 {1: 5, 2: 4}, worker 1 {1: 1, 6: 4.5}. Sums 1: 6, 2: 4, 6: 4.5 -> {1, 6}.
  auto r = RunManual(schemes, 0, {{0, 5, 4, 0, 0, 0, 0, 0.5f}, {0, 1, 0, 0.25f, 0, 0, 4.5f, 0}});
  for (const auto& g : r.aggregates) {
    CHECK(std::get<SparseVector>(g) == SparseVector{8, {1, 6}, {3.0f, 2.25f}});
  }
  CHECK(Residual(*schemes[0]) == std::vector<float>{0, 0, 4, 0, 0, 0, 0, 0.5f});  // 4 put back
  CHECK(Residual(*schemes[1]) == std::vector<float>{0, 0, 0, 0.25f, 0, 0, 0, 0});
  // a0 = {1: 9, 3: -2}, a1 = {5: 2, 6: 0.125}: sums |-2| at 3 and |2| at 5 tie for the second slot.
  r = RunManual(schemes, 1, {{0, 9, -4, -2, 0, 0, 0, -0.5f}, {0, 0, 0, -0.25f, 0, 2, 0.125f, 0}});
  CHECK(std::get<SparseVector>(r.aggregates[0]) == SparseVector{8, {1, 3}, {4.5f, -1.0f}});
  CHECK(Residual(*schemes[1]) == std::vector<float>{0, 0, 0, 0, 0, 2, 0.125f, 0});  // both put back
}

TEST_CASE("gTop-k matches a host reference over rounds, residual invariant holds exactly", "[schemes][gtopk]") {
  const std::uint32_t p = GENERATE(1u, 3u, 4u);
  const std::size_t dim = 300, k = 12;
  std::vector<std::unique_ptr<Scheme>> schemes;
  for (std::uint32_t w = 0; w < p; ++w) schemes.push_back(MakeGTopKScheme({w, p, 0, dim, {}, k, 1}));
  std::vector<std::vector<float>> e(p, std::vector<float>(dim, 0.0f));
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal;
  for (std::uint64_t round = 0; round < 5; ++round) {
    std::vector<std::vector<float>> g(p, std::vector<float>(dim)), a(p);
    for (auto& gw : g)
      for (auto& v : gw) v = normal(rng);
    const auto r = RunManual(schemes, round, g);
    std::vector<float> sum(dim, 0.0f);
    std::vector<std::vector<std::uint32_t>> local(p);
    for (std::uint32_t w = 0; w < p; ++w) {
      a[w] = e[w];
      for (std::size_t i = 0; i < dim; ++i) a[w][i] += g[w][i];
      local[w] = NaiveTopKSorted(a[w], k);
      const auto& sent = std::get<SparseVector>(*r.payloads[0][w]);
      REQUIRE(sent.idx == local[w]);
      for (std::size_t j = 0; j < k; ++j) CHECK(sent.val[j] == a[w][local[w][j]]);
      for (auto i : local[w]) sum[i] += a[w][i];
    }
    const auto global = NaiveTopKSorted(sum, k);
    SparseVector want{dim, global, {}};
    for (auto i : global) want.val.push_back(sum[i] / static_cast<float>(p));
    for (const auto& agg : r.aggregates) CHECK(std::get<SparseVector>(agg) == want);
    for (std::uint32_t w = 0; w < p; ++w) {
      e[w] = Residual(*schemes[w]);
      CheckResidualInvariant(e[w], a[w], local[w], global);
    }
  }
}

TEST_CASE("gTop-k with one worker equals top-k+EF", "[schemes][gtopk]") {
  auto opts = SchemeOptions(1, 2, 60);
  opts.density = 0.1;
  ExpectMatches(
      LeastSquares(200, 40, 6), GTopK(), [](SchemeContext ctx) { return MakeTopKEfScheme(std::move(ctx)); }, opts,
      /*tolerance=*/0.0);
}

TEST_CASE("gTop-k converges to the least-squares optimum", "[schemes][gtopk][convergence][long]") {
  auto opts = SchemeOptions(GENERATE(1u, 4u, 8u), 2, 400);
  opts.density = 0.1;
  ExpectConvergesOnLeastSquares(GTopK(), opts, 1e-2);
}

TEST_CASE("gTop-k converges on logistic regression", "[schemes][gtopk][convergence]") {
  auto opts = SchemeOptions(GENERATE(1u, 4u, 8u), 1, 600, /*lr=*/1.0, /*momentum=*/0.0);
  opts.density = 0.2;
  ExpectConvergesOnLogistic(GTopK(), opts, 1e-2);
}

TEST_CASE("gTop-k at density 1 equals dense", "[schemes][gtopk]") {
  auto opts = SchemeOptions(4, 2, 20);
  opts.density = 1.0;
  ExpectMatches(LeastSquares(200, 30, 2), GTopK(), Dense(), opts, 1e-6);
}

TEST_CASE("gTop-k bytes: 8k up and 8k down per shard, independent of P", "[schemes][gtopk][bytes]") {
  const std::uint32_t p = GENERATE(1u, 2u, 8u);
  const LeastSquares problem(100, 1000, 1);
  auto opts = SchemeOptions(p, 2, 3);
  opts.density = 0.01;  // k = 5 per shard
  auto r = Simulate(GTopK(), problem, opts);
  REQUIRE(r.status.ok());
  for (const auto& t : r.traffic) {
    CHECK(t.bytes_up == 2 * 8 * 5);
    CHECK(t.bytes_down == 2 * 8 * 5);  // the union of P selections is cut back to k
  }
}

TEST_CASE("gTop-k: a worker with a non-finite gradient skips, replicas stay identical", "[schemes][gtopk][nan]") {
  auto opts = SchemeOptions(4, 2, 30);
  opts.density = 0.2;
  opts.tamper = PoisonGradients({{1, 7, 3, kNaN}, {2, 9, 15, -kInf}});
  ExpectSkipsNonFinite(GTopK(), LeastSquares(200, 40, 3), opts);
}

TEST_CASE("gTop-k state round-trips, bad state is InvalidArgument", "[schemes][gtopk][state]") {
  const SchemeContext ctx{0, 1, 0, 50, {}, 4, 1};
  auto a = MakeGTopKScheme(ctx);
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal;
  auto grad = [&] {
    std::vector<float> g(50);
    for (auto& v : g) v = normal(rng);
    return g;
  };
  std::vector<std::unique_ptr<Scheme>> one;
  one.push_back(std::move(a));
  for (std::uint64_t round = 0; round < 3; ++round) RunManual(one, round, {grad()});
  std::vector<std::unique_ptr<Scheme>> other;
  other.push_back(MakeGTopKScheme(ctx));
  const SchemeState saved = one[0]->SaveState();
  REQUIRE(other[0]->RestoreState(saved).ok());
  CHECK(other[0]->SaveState().arrays == saved.arrays);
  const auto g = grad();
  const auto r1 = RunManual(one, 3, {g});
  const auto r2 = RunManual(other, 3, {g});
  CHECK(std::get<SparseVector>(*r1.payloads[0][0]) == std::get<SparseVector>(*r2.payloads[0][0]));
  CHECK(Residual(*one[0]) == Residual(*other[0]));
  CHECK(other[0]->RestoreState(SchemeState{}).code() == absl::StatusCode::kInvalidArgument);
  SchemeState short_state{{{"residual", std::vector<float>(49)}}, {}};
  CHECK(other[0]->RestoreState(short_state).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("gTop-k config: an empty section is valid, unknown keys are named", "[schemes][gtopk][config]") {
  YAML::Node spec = YAML::Load("{name: gtopk, density: 0.05, gtopk: {}}");
  ConfigReader ok_reader(spec, "scheme");
  auto bound = ParseSchemeSection(ok_reader);
  REQUIRE(bound.ok());
  CHECK(bound->global_momentum);
  CHECK(std::string(bound->make(SchemeContext{0, 2, 0, 10, {}, 1, 0})->name()) == "gtopk");
  YAML::Node bad = YAML::Load("{keep: 3}");
  ConfigReader bad_reader(bad, "scheme.gtopk");
  GTopKConfig config;
  const absl::Status st = config.Read(bad_reader);
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(st.message()), Catch::Contains("scheme.gtopk") && Catch::Contains("keep"));
}
