// Recovery diagnostics (engine/scheme.h RoundDiagnostics, schemes/recovery_check.h): the comparison
// against a naive reference, and scheme.diagnostics leaving every scheme's aggregate unchanged.
#include <cmath>
#include <random>
#include <set>

#include <catch2/catch.hpp>

#include "schemes/gs_sgd.h"
#include "schemes/recovery_check.h"
#include "schemes/topk_ef.h"
#include "support/scheme_checks.h"
#include "support/simulation.h"
#include "support/sketch_schemes.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

std::vector<std::vector<float>> RandomGrads(std::uint32_t workers, std::uint64_t dim, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> grads(workers, std::vector<float>(dim));
  for (auto& g : grads) {
    for (auto& v : g) v = normal(rng);
    // a few heavy entries shared by every worker, as in real gradients
    for (std::uint64_t i = 0; i < dim; i += 37) g[i] += 6.0f;
  }
  return grads;
}

double Mass(const std::vector<float>& s, const std::vector<std::uint32_t>& idx) {
  double m = 0;
  for (auto i : idx) m += static_cast<double>(s[i]) * s[i];
  return m;
}

std::uint64_t Overlap(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
  const std::set<std::uint32_t> sa(a.begin(), a.end());
  std::uint64_t n = 0;
  for (auto i : b) n += sa.count(i);
  return n;
}

SchemeFactory WithDiagnostics(SchemeFactory make, bool on) {
  return [make, on](SchemeContext ctx) {
    ctx.diagnostics = on;
    return make(std::move(ctx));
  };
}

}  // namespace

TEST_CASE("CompareWithExact agrees with a naive reference", "[schemes][diagnostics]") {
  const std::uint64_t dim = 500, k = 20;
  const auto grads = RandomGrads(3, dim, 7);
  const std::vector<float> s = SumInOrder(grads);
  const auto top = NaiveTopKIndices(s, k);
  SparseVector g{dim, {}, {}};
  for (std::uint32_t i = 0; i < dim; i += 5) {  // some hits, some misses
    g.idx.push_back(i);
    g.val.push_back(1.0f);
  }
  const std::vector<std::uint32_t> candidates(top.begin(), top.begin() + 15);
  RoundDiagnostics d;
  REQUIRE(CompareWithExact(DenseValues{s}, Aggregate{g}, dim, k, &candidates, d).ok());
  std::vector<std::uint32_t> all(dim);
  for (std::uint32_t i = 0; i < dim; ++i) all[i] = i;
  CHECK(d.exact);
  CHECK(d.k == k);
  CHECK(d.exact_sq == Approx(Mass(s, all)).epsilon(1e-9));
  CHECK(d.best_sq == Approx(Mass(s, top)).epsilon(1e-9));
  CHECK(d.returned_sq == Approx(Mass(s, g.idx)).epsilon(1e-9));
  CHECK(d.hits == Overlap(top, g.idx));
  CHECK(d.candidate_hits == 15);
  CHECK(d.has_candidates);
}

TEST_CASE("CompareWithExact refuses an exact result of the wrong shape, naming it", "[schemes][diagnostics]") {
  RoundDiagnostics d;
  const auto st = CompareWithExact(DenseValues{{1, 2}}, Aggregate{DenseValues{{1, 2, 3}}}, 3, 1, nullptr, d);
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(st.message()), Catch::Contains("3 dense values"));
  SparseVector outside{3, {7}, {1.0f}};
  CHECK_FALSE(CompareWithExact(DenseValues{{1, 2, 3}}, Aggregate{outside}, 3, 1, nullptr, d).ok());
}

TEST_CASE("One top-k worker recovers the exact top-k of its input", "[schemes][diagnostics]") {
  const std::uint64_t dim = 400, k = 12;
  auto workers = MakeWorkers(1, dim, k, 3, WithDiagnostics(MakeTopKEfScheme, true));
  const auto round = RequireManualRound(workers, 0, RandomGrads(1, dim, 4));
  const RoundDiagnostics d = workers[0]->diagnostics();
  REQUIRE(d.compressed);
  REQUIRE(d.exact);
  CHECK(d.hits == k);
  CHECK(d.returned_sq == Approx(d.best_sq));
  CHECK(round.specs.front().reduction == Reduction::kDenseSum);  // the diagnostic phase comes first
  CHECK_FALSE(round.specs.front().final_phase);
}

TEST_CASE("gs-SGD's diagnostics report its candidates and residual against the reference", "[schemes][diagnostics]") {
  const std::uint64_t dim = 2000, k = 20;
  GsSgdConfig config;
  config.p2 = 4;
  const auto make = [config](SchemeContext ctx) { return MakeGsSgdScheme(std::move(ctx), config); };
  auto workers = MakeWorkers(4, dim, k, 11, WithDiagnostics(make, true));
  const auto grads = RandomGrads(4, dim, 12);
  const auto round = RequireManualRound(workers, 0, grads);
  const RoundDiagnostics d = workers[1]->diagnostics();
  REQUIRE(d.exact);
  REQUIRE(d.has_candidates);
  const std::vector<float> s = SumInOrder(grads);
  const auto top = NaiveTopKIndices(s, k);
  const auto* candidates = ResultIndices(round.results[1]);  // phase 0 diagnostic, phase 1 the sketch
  REQUIRE(candidates != nullptr);
  CHECK(d.candidate_hits == Overlap(top, *candidates));
  const auto& g = std::get<SparseVector>(round.aggregates[1]);
  CHECK(d.hits == Overlap(top, g.idx));
  // The residual is the input without G_t's entries: ||e||^2 = ||a||^2 - ||a at G_t||^2.
  const auto& a = grads[1];
  std::vector<std::uint32_t> all(dim);
  for (std::uint32_t i = 0; i < dim; ++i) all[i] = i;
  CHECK(d.input_sq == Approx(Mass(a, all)).epsilon(1e-5));
  CHECK(d.residual_sq == Approx(Mass(a, all) - Mass(a, g.idx)).epsilon(1e-5));
}

TEST_CASE("scheme.diagnostics leaves every aggregate unchanged", "[schemes][diagnostics]") {
  const LeastSquares problem(300, 60, 21, /*batch=*/6);
  auto opts = SchemeOptions(4, 2, 25, /*lr=*/0.1);
  opts.density = 0.1;
  GsSgdConfig config;
  config.p2 = 4;
  const SchemeFactory gs = [config](SchemeContext ctx) { return MakeGsSgdScheme(std::move(ctx), config); };
  for (const SchemeFactory& make : {SchemeFactory(MakeTopKEfScheme), gs}) {
    auto plain = Simulate(WithDiagnostics(make, false), problem, opts);
    auto diag = Simulate(WithDiagnostics(make, true), problem, opts);
    REQUIRE(plain.status.ok());
    REQUIRE(diag.status.ok());
    CHECK(diag.replicas_identical);
    CHECK(plain.checksums == diag.checksums);
    REQUIRE(diag.diagnostics.size() == 25);
    CHECK(diag.diagnostics.back().exact);
    CHECK_FALSE(plain.diagnostics.back().exact);
    CHECK(plain.diagnostics.back().has_residual);
    CHECK(diag.diagnostics.back().returned_sq <= diag.diagnostics.back().exact_sq * (1 + 1e-6));
  }
}
