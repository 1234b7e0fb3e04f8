// Dense baseline and top-k with error feedback, end to end through the in-process aggregator.
#include <catch2/catch.hpp>

#include "schemes/dense.h"
#include "schemes/topk_ef.h"
#include "support/scheme_checks.h"
#include "support/simulation.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

SchemeFactory TopK(std::uint64_t warmup = 0) {
  return [warmup](SchemeContext ctx) {
    ctx.warmup_rounds = warmup;
    return MakeTopKEfScheme(std::move(ctx));
  };
}

SimOptions Options(std::uint32_t workers, std::uint32_t shards, std::uint64_t rounds) {
  return SchemeOptions(workers, shards, rounds, /*lr=*/0.2);
}

}  // namespace

TEST_CASE("Dense with P workers equals one process with batch P*b", "[schemes][dense]") {
  const std::uint32_t p = GENERATE(2u, 4u);
  const LeastSquares multi(256, 40, 5, /*batch=*/8);
  const LeastSquares single(256, 40, 5, /*batch=*/8 * p);
  auto a = Simulate(Dense(), multi, Options(p, 2, 30));
  auto b = Simulate(Dense(), single, Options(1, 2, 30));
  REQUIRE(a.status.ok());
  REQUIRE(b.status.ok());
  CHECK(a.replicas_identical);
  CHECK(RelativeError(a.replicas[0], b.replicas[0]) < 1e-5);
}

TEST_CASE("Dense and top-k+EF converge to the least-squares optimum", "[schemes][convergence][long]") {
  const std::uint32_t p = GENERATE(1u, 4u, 8u);
  const LeastSquares problem(400, 50, 9);
  auto dense = Simulate(Dense(), problem, Options(p, 2, 300));
  auto opts = Options(p, 2, 1000);
  opts.density = 0.1;
  opts.optimizer.lr.base_lr = 0.05;  // error feedback delays updates: a smaller step stays stable
  auto topk = Simulate(TopK(), problem, opts);
  REQUIRE(dense.status.ok());
  REQUIRE(topk.status.ok());
  CHECK(dense.replicas_identical);
  CHECK(topk.replicas_identical);
  CHECK(RelativeError(dense.replicas[0], problem.optimum()) < 1e-3);
  CHECK(RelativeError(topk.replicas[0], problem.optimum()) < 1e-2);
}

TEST_CASE("Top-k+EF converges on logistic regression", "[schemes][convergence]") {
  auto opts = Options(4, 1, 2000);
  opts.density = 0.2;
  opts.optimizer.lr.base_lr = 1.0;
  opts.optimizer.momentum = 0.0;
  ExpectConvergesOnLogistic(TopK(), opts, 1e-2);
}

TEST_CASE("Top-k+EF at density 1 equals dense", "[schemes][dense]") {
  auto opts = Options(4, 2, 20);
  opts.density = 1.0;
  ExpectMatches(LeastSquares(200, 30, 2), TopK(), Dense(), opts, 1e-6);
}

TEST_CASE("Top-k+EF conserves mass exactly: sent + residual == e + g", "[schemes][ef]") {
  SchemeContext ctx{0, 1, 0, 64, MakeLayerTable({{"w", {64}}}), 5, 1};
  auto scheme = MakeTopKEfScheme(ctx);
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> e(64, 0.0f);
  for (std::uint64_t round = 0; round < 6; ++round) {
    std::vector<float> g(64);
    for (auto& v : g) v = normal(rng);
    kernels::DeviceArray<float> d_g(g);
    REQUIRE(scheme->BeginRound({round, 0.0}, d_g.data()).ok());
    auto c = scheme->Contribute(0, nullptr);
    REQUIRE(c.ok());
    const auto& sent = std::get<SparseVector>(*c->payload);
    CHECK(sent.idx.size() == 5);
    REQUIRE(scheme->Finish(PhaseResult{sent, 1}).ok());
    const auto residual = scheme->SaveState().arrays.at("residual");
    std::vector<float> total = residual;
    for (std::size_t i = 0; i < sent.idx.size(); ++i) {
      CHECK(residual[sent.idx[i]] == 0.0f);
      total[sent.idx[i]] = sent.val[i];
    }
    for (std::size_t i = 0; i < 64; ++i) CHECK(total[i] == e[i] + g[i]);  // bitwise: values moved, not recomputed
    e = residual;
  }
}

TEST_CASE("A worker with a non-finite gradient skips the round, replicas stay identical", "[schemes][nan]") {
  const LeastSquares problem(200, 40, 3);
  auto opts = Options(4, 2, 30);
  opts.density = 0.2;
  opts.tamper = PoisonGradients({{1, 7, 3, kNaN}, {2, 9, 0, kInf}});
  for (const auto& factory : {Dense(), TopK()}) ExpectSkipsNonFinite(factory, problem, opts);
}

TEST_CASE("Dense warm-up rounds send everything, then compression starts", "[schemes][warmup]") {
  const LeastSquares problem(100, 40, 1);
  auto opts = Options(2, 1, 6);
  opts.density = 0.1;
  auto r = Simulate(TopK(/*warmup=*/3), problem, opts);
  REQUIRE(r.status.ok());
  for (std::uint64_t round = 0; round < 6; ++round) {
    const std::uint64_t want_up = round < 3 ? 40 * 4 : 4 * 8;  // dense: 4 bytes/value; sparse: 8 bytes/entry
    CHECK(r.traffic[round].bytes_up == want_up);
  }
}

TEST_CASE("Bytes per phase follow the documented formulas", "[schemes][bytes]") {
  const LeastSquares problem(100, 1000, 1);
  auto opts = Options(3, 2, 3);
  opts.density = 0.01;
  auto dense = Simulate(Dense(), problem, opts);
  auto topk = Simulate(TopK(), problem, opts);
  CHECK(dense.traffic[1].bytes_up == 4 * 1000);
  CHECK(dense.traffic[1].bytes_down == 4 * 1000);
  CHECK(topk.traffic[1].bytes_up == 8 * 10);        // k = 5 per shard, 2 shards
  CHECK(topk.traffic[1].bytes_down <= 8 * 10 * 3);  // union of at most P selections
}
