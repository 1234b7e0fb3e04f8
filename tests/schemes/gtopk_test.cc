// gTop-k (PS mode): the global top-k of the summed local top-k selections, the residual put-back, and
// end-to-end behaviour through the in-process aggregator. References are naive host loops.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "schemes/dense.h"
#include "schemes/gtopk.h"
#include "schemes/reduce.h"
#include "schemes/registry.h"
#include "schemes/topk_ef.h"
#include "support/scheme_checks.h"
#include "support/simulation.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

SchemeFactory GTopK() {
  return [](SchemeContext ctx) { return MakeGTopKScheme(std::move(ctx)); };
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

// One round of every worker's scheme through a Reducer, as the aggregator runs it.
struct ManualRound {
  std::vector<Contribution> payloads;  // per worker (one phase)
  PhaseResult result;
  std::vector<Aggregate> aggregates;   // per worker
};

ManualRound RunManual(std::vector<std::unique_ptr<Scheme>>& schemes, std::uint64_t round,
                      const std::vector<std::vector<float>>& grads) {
  std::vector<kernels::DeviceArray<float>> d;
  for (const auto& g : grads) d.emplace_back(g);
  ManualRound out;
  std::vector<const Contribution*> ptrs;
  for (std::size_t w = 0; w < schemes.size(); ++w) {
    REQUIRE(schemes[w]->BeginRound({round, 0.0}, d[w].data()).ok());
    REQUIRE(schemes[w]->NumPhases() == 1);
    auto c = schemes[w]->Contribute(0, nullptr);
    REQUIRE(c.ok());
    out.payloads.push_back(*c);
  }
  for (const auto& c : out.payloads) ptrs.push_back(&c);
  Reducer reducer(grads[0].size());
  auto r = reducer.Reduce(out.payloads[0].spec, ptrs, nullptr);
  REQUIRE(r.ok());
  out.result = *r;
  for (auto& s : schemes) {
    auto g = s->Finish(out.result);
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

std::vector<float> Residual(const Scheme& s) { return s.SaveState().arrays.at("residual"); }

// e_new + a ⊙ (mask_local ∧ mask_global) == a, bitwise (ALGORITHMS.md §4.5).
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

TEST_CASE("gTop-k keeps the global top-k of the sums; ties go to the smaller index", "[schemes][gtopk]") {
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

TEST_CASE("gTop-k matches a host reference over rounds; residual invariant holds exactly", "[schemes][gtopk]") {
  const std::uint32_t p = GENERATE(1u, 3u, 4u);
  const std::size_t dim = 300, k = 12;
  std::vector<std::unique_ptr<Scheme>> schemes;
  for (std::uint32_t w = 0; w < p; ++w) schemes.push_back(MakeGTopKScheme({w, p, 0, dim, {}, k, 1}));
  std::vector<std::vector<float>> e(p, std::vector<float>(dim, 0.0f));
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal;
  for (std::uint64_t round = 0; round < 5; ++round) {
    std::vector<std::vector<float>> g(p, std::vector<float>(dim)), a(p);
    for (auto& gw : g) for (auto& v : gw) v = normal(rng);
    const auto r = RunManual(schemes, round, g);
    std::vector<float> sum(dim, 0.0f);
    std::vector<std::vector<std::uint32_t>> local(p);
    for (std::uint32_t w = 0; w < p; ++w) {
      a[w] = e[w];
      for (std::size_t i = 0; i < dim; ++i) a[w][i] += g[w][i];
      local[w] = HostTopK(a[w], k);
      const auto& sent = std::get<SparseVector>(*r.payloads[w].payload);
      REQUIRE(sent.idx == local[w]);
      for (std::size_t j = 0; j < k; ++j) CHECK(sent.val[j] == a[w][local[w][j]]);
      for (auto i : local[w]) sum[i] += a[w][i];
    }
    const auto global = HostTopK(sum, k);
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
  const LeastSquares problem(200, 40, 6);
  auto opts = Options(1, 2, 60);
  opts.density = 0.1;
  auto g = Simulate(GTopK(), problem, opts);
  auto t = Simulate([](SchemeContext ctx) { return MakeTopKEfScheme(std::move(ctx)); }, problem, opts);
  REQUIRE(g.status.ok());
  REQUIRE(t.status.ok());
  CHECK(g.replicas[0] == t.replicas[0]);
}

TEST_CASE("gTop-k converges to the least-squares optimum", "[schemes][gtopk][convergence]") {
  const std::uint32_t p = GENERATE(1u, 4u, 8u);
  const LeastSquares problem(400, 50, 9);
  auto opts = Options(p, 2, 400);
  opts.density = 0.1;
  UseCosineSchedule(opts);
  ExpectConverges(GTopK(), problem, opts, problem.optimum(), 1e-2, p);
}

TEST_CASE("gTop-k converges on logistic regression", "[schemes][gtopk][convergence]") {
  const std::uint32_t p = GENERATE(1u, 4u, 8u);
  const Logistic problem(400, 30, 0.05, 4);
  const auto optimum = problem.ReferenceOptimum();
  auto opts = Options(p, 1, 600);
  opts.density = 0.2;
  opts.optimizer.lr.base_lr = 1.0;
  opts.optimizer.momentum = 0.0;
  UseCosineSchedule(opts);
  ExpectConverges(GTopK(), problem, opts, optimum, 1e-2, p);
}

TEST_CASE("gTop-k at density 1 equals dense", "[schemes][gtopk]") {
  const LeastSquares problem(200, 30, 2);
  auto opts = Options(4, 2, 20);
  opts.density = 1.0;
  auto g = Simulate(GTopK(), problem, opts);
  auto dense = Simulate([](SchemeContext ctx) { return MakeDenseScheme(std::move(ctx)); }, problem, opts);
  REQUIRE(g.status.ok());
  REQUIRE(dense.status.ok());
  CHECK(RelativeError(g.replicas[0], dense.replicas[0]) < 1e-6);
}

TEST_CASE("gTop-k bytes: 8k up and 8k down per shard, independent of P", "[schemes][gtopk][bytes]") {
  const std::uint32_t p = GENERATE(1u, 2u, 8u);
  const LeastSquares problem(100, 1000, 1);
  auto opts = Options(p, 2, 3);
  opts.density = 0.01;  // k = 5 per shard
  auto r = Simulate(GTopK(), problem, opts);
  REQUIRE(r.status.ok());
  for (const auto& t : r.traffic) {
    CHECK(t.bytes_up == 2 * 8 * 5);
    CHECK(t.bytes_down == 2 * 8 * 5);  // the union of P selections is cut back to k
  }
}

TEST_CASE("gTop-k: a worker with a non-finite gradient skips; replicas stay identical", "[schemes][gtopk][nan]") {
  const LeastSquares problem(200, 40, 3);
  auto opts = Options(4, 2, 30);
  opts.density = 0.2;
  opts.tamper = [](std::uint32_t worker, std::uint64_t round, std::vector<float>& g) {
    if (worker == 1 && round == 7) g[3] = std::numeric_limits<float>::quiet_NaN();
    if (worker == 2 && round == 9) g[15] = -std::numeric_limits<float>::infinity();
  };
  auto r = Simulate(GTopK(), problem, opts);
  REQUIRE(r.status.ok());
  CHECK(r.skipped_rounds == 2);
  CHECK(r.replicas_identical);
  for (float v : r.replicas[0]) REQUIRE(std::isfinite(v));
}

TEST_CASE("gTop-k state round-trips; bad state is InvalidArgument", "[schemes][gtopk][state]") {
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
  CHECK(std::get<SparseVector>(*r1.payloads[0].payload) == std::get<SparseVector>(*r2.payloads[0].payload));
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
