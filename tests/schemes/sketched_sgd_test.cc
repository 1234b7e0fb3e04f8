// Sketched-SGD (docs/methods.md, sketched_sgd): the aggregate against naive host references of the local
// momentum correction (exact global top-k of the summed v when the sketch is collision-free; top
// p2*k estimates then exact top-k with collisions), masking of u and v, bytes per phase, density 1
// == dense without momentum, convergence, replicas, the NaN guard, warm-up, state and configuration.
#include "schemes/sketched_sgd.h"

#include <catch2/catch.hpp>

#include "schemes/registry.h"
#include "support/scheme_checks.h"
#include "support/simulation.h"
#include "support/sketch_schemes.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

constexpr std::uint64_t kCollisionFree = 1 << 14;

// f32 tables of c = 10k columns, whose candidates the naive references below pin.
SketchedSgdConfig Config(std::uint32_t p2, double momentum, std::uint64_t cols = 0) {
  SketchedSgdConfig c;
  c.p2 = p2;
  c.momentum = momentum;
  c.cols = cols;
  c.cols_factor = 10;
  c.table = SketchSizing::Table::kF32;
  return c;
}

SchemeFactory Sketched(const SketchedSgdConfig& config = {}, std::uint64_t warmup = 0) {
  return [config, warmup](SchemeContext ctx) {
    ctx.warmup_rounds = warmup;
    return MakeSketchedSgdScheme(std::move(ctx), config);
  };
}

// Sketched-SGD runs the optimizer with momentum 0: the 0.9 asked for here is ignored.
SimOptions Options(std::uint32_t workers, std::uint32_t shards, std::uint64_t rounds, double lr) {
  return SchemeOptions(workers, shards, rounds, lr, /*momentum=*/0.9);
}

std::vector<float> Array(const Scheme& s, const char* name) { return s.SaveState().arrays.at(name); }

std::string Message(const absl::Status& s) { return std::string(s.message()); }

}  // namespace

TEST_CASE("Sketched-SGD with a collision-free sketch equals exact global top-k of the summed v",
          "[schemes][sketched_sgd]") {
  const std::uint32_t p2 = GENERATE(0u, 1u, 2u);
  const std::uint32_t workers = 4;
  const std::uint64_t d = 60, k = 6;
  const float m = 0.5f;  // a power of two: m*u is exact, so the host reference is bitwise
  auto schemes = MakeWorkers(workers, d, k, 11, Sketched(Config(p2, m, kCollisionFree)));
  Reducer reducer(d);
  std::mt19937_64 rng(5);
  std::vector<std::vector<float>> u(workers, std::vector<float>(d, 0.0f)), v = u;
  for (std::uint64_t round = 0; round < 8; ++round) {
    std::vector<std::vector<float>> g(workers);
    for (std::uint32_t w = 0; w < workers; ++w) {
      g[w] = RandomGradient(d, rng);
      for (std::uint64_t i = 0; i < d; ++i) {
        u[w][i] = m * u[w][i] + g[w][i];
        v[w][i] += u[w][i];
      }
    }
    auto r = RunManualRound(schemes, reducer, round, g);
    REQUIRE(r.ok());
    const SparseVector want = NaiveTopKMean(SumInOrder(v), k, static_cast<float>(workers));
    for (std::uint32_t w = 0; w < workers; ++w) {
      const auto& got = std::get<SparseVector>(r->aggregates[w]);
      REQUIRE(got.idx == want.idx);
      CHECK(got.val == want.val);
      for (auto i : want.idx) u[w][i] = v[w][i] = 0.0f;  // momentum stopping, error reset
      CHECK(Array(*schemes[w], "momentum") == u[w]);
      CHECK(Array(*schemes[w], "accumulator") == v[w]);
    }
  }
}

TEST_CASE("Sketched-SGD with collisions and p2 = P: exact top-k of the summed v over the candidates",
          "[schemes][sketched_sgd]") {
  const std::uint32_t workers = 4;
  const std::uint64_t d = 400, k = 8, seed = 6;  // c = 80 < d
  auto schemes = MakeWorkers(workers, d, k, seed, Sketched(Config(workers, 0.9)));
  Reducer reducer(d);
  std::mt19937_64 rng(12);
  std::vector<std::vector<float>> g(workers);
  for (auto& x : g) x = RandomGradient(d, rng);
  auto r = RunManualRound(schemes, reducer, 0, g);  // round 0: u = v = g
  REQUIRE(r.ok());
  auto hash = CountSketchHash::Create({5, 80, SketchSeed(seed, 0), d});
  REQUIRE(hash.ok());
  const auto cand = NaiveTopKSorted(NaiveSketchEstimates(*hash, g), workers * k);
  REQUIRE(*ResultIndices(r->results[0]) == cand);
  const auto& got = std::get<SparseVector>(r->aggregates[0]);
  CheckExactTopKAmong(got, cand, SumInOrder(g), k, workers);
  for (std::uint32_t w = 0; w < workers; ++w) {  // masked exactly at G_t's entries, untouched elsewhere
    const auto u = Array(*schemes[w], "momentum");
    const auto v = Array(*schemes[w], "accumulator");
    for (std::uint64_t i = 0; i < d; ++i) {
      const bool taken = std::binary_search(got.idx.begin(), got.idx.end(), static_cast<std::uint32_t>(i));
      CHECK(u[i] == (taken ? 0.0f : g[w][i]));
      CHECK(v[i] == (taken ? 0.0f : g[w][i]));
    }
  }
}

TEST_CASE("Sketched-SGD bytes per phase follow the documented formulas", "[schemes][sketched_sgd][bytes]") {
  for (std::uint32_t p2 : {0u, 2u, 4u}) CheckSketchPhaseBytes(4, p2, Sketched(Config(p2, 0.9)));
}

TEST_CASE("Sketched-SGD at density 1 equals dense SGD without momentum", "[schemes][sketched_sgd][dense]") {
  // Every entry is kept every round, so masking zeroes u each round: v = g, G_t = mean g.
  auto opts = Options(4, 2, 20, 0.1);
  opts.density = 1.0;
  auto sgd = opts;
  sgd.optimizer.momentum = 0.0;
  ExpectMatches(LeastSquares(200, 30, 2), Sketched(Config(2, 0.9)), opts, Dense(), sgd, 1e-6);
}

TEST_CASE("Sketched-SGD converges on least squares with sketch collisions", "[schemes][sketched_sgd][convergence]") {
  auto opts = Options(GENERATE(1u, 4u, 8u), 1, 300, 0.05);  // local momentum 0.9 (the default): effective step 0.5
  opts.density = 0.1;                                       // k = 5, c = 50 = d: realistic collisions
  ExpectConvergesOnLeastSquares(Sketched(), opts, 1e-3);
}

TEST_CASE("Sketched-SGD converges on logistic regression with sketch collisions",
          "[schemes][sketched_sgd][convergence]") {
  auto opts = Options(GENERATE(1u, 4u, 8u), 1, 300, 1.0);
  opts.density = 0.2;  // k = 6, c = 60
  ExpectConvergesOnLogistic(Sketched(), opts, 1e-3);
}

TEST_CASE("Sketched-SGD: a worker with a non-finite gradient skips, replicas stay identical",
          "[schemes][sketched_sgd][nan]") {
  const LeastSquares problem(200, 40, 3);
  auto opts = Options(4, 2, 30, 0.05);
  opts.density = 0.2;
  opts.tamper = PoisonGradients({{3, 4, 10, kNaN}, {0, 12, 2, kInf}});
  for (std::uint32_t p2 : {0u, 2u}) ExpectSkipsNonFinite(Sketched(Config(p2, 0.9)), problem, opts);
}

TEST_CASE("Sketched-SGD dense warm-up sends v whole, zeroes v and keeps the momentum",
          "[schemes][sketched_sgd][warmup]") {
  const std::uint64_t d = 40;
  auto schemes = MakeWorkers(2, d, 4, 1, Sketched(Config(2, 0.5), /*warmup=*/2));
  Reducer reducer(d);
  std::mt19937_64 rng(4);
  std::vector<std::vector<float>> u(2, std::vector<float>(d, 0.0f));
  for (std::uint64_t round = 0; round < 3; ++round) {
    std::vector<std::vector<float>> g = {RandomGradient(d, rng), RandomGradient(d, rng)};
    auto r = RunManualRound(schemes, reducer, round, g);
    REQUIRE(r.ok());
    if (round == 2) {  // compression starts: sketch (5 x 40 cells) and K = 8 values
      CHECK(r->bytes[0].up == 5 * 40 * 4);
      CHECK(r->bytes[1].up == 4 * 8);
      break;
    }
    CHECK(r->bytes[0].up == 4 * d);
    for (std::uint32_t w = 0; w < 2; ++w) {
      for (std::uint64_t i = 0; i < d; ++i) u[w][i] = 0.5f * u[w][i] + g[w][i];
      CHECK(std::get<DenseValues>(*r->payloads[0][w]).values == u[w]);  // v = 0 + u was sent
      CHECK(Array(*schemes[w], "momentum") == u[w]);
      CHECK(Array(*schemes[w], "accumulator") == std::vector<float>(d, 0.0f));
    }
  }
}

TEST_CASE("Sketched-SGD state round-trips through Save/Restore", "[schemes][sketched_sgd][state]") {
  const auto b = CheckStateRoundTrip(Sketched());
  CHECK(b->SaveState().arrays.size() == 2);
  const std::uint64_t d = 80;
  SchemeState only_u{{{"momentum", std::vector<float>(d)}}, {}};
  const auto missing = b->RestoreState(only_u);
  CHECK(missing.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(Message(missing), Catch::Contains("accumulator"));
  SchemeState long_v{{{"momentum", std::vector<float>(d)}, {"accumulator", std::vector<float>(d + 1)}}, {}};
  CHECK(b->RestoreState(long_v).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Sketched-SGD configuration: defaults, reading, and errors that name the key",
          "[schemes][sketched_sgd][config]") {
  const SketchedSgdConfig defaults;
  CHECK(defaults.rows == 5);
  CHECK(defaults.cols_factor == 4.0);
  CHECK(defaults.p2 == 2);
  CHECK(defaults.keep == SketchSizing::Keep::kTopK);
  CHECK(defaults.table == SketchSizing::Table::kF16);
  CHECK(defaults.momentum == 0.9);
  CHECK(defaults.Validate("scheme.sketched_sgd").ok());
  SketchedSgdConfig c;
  c.momentum = 1.0;
  CHECK_THAT(Message(c.Validate("scheme.sketched_sgd")), Catch::StartsWith("scheme.sketched_sgd.momentum:"));
  c.momentum = -0.1;
  CHECK_THAT(Message(c.Validate("scheme.sketched_sgd")), Catch::StartsWith("scheme.sketched_sgd.momentum:"));
  c = {};
  c.rows = 0;
  CHECK_THAT(Message(c.Validate("scheme.sketched_sgd")), Catch::StartsWith("scheme.sketched_sgd.rows:"));

  ConfigReader good(YAML::Load("{momentum: 0.5, cols_factor: 4, p2: 4}"), "scheme.sketched_sgd");
  SketchedSgdConfig read;
  REQUIRE(read.Read(good).ok());
  CHECK(read.momentum == 0.5);
  CHECK(read.cols_factor == 4.0);
  CHECK(read.p2 == 4);
  ConfigReader invalid(YAML::Load("{momentum: 1.5}"), "scheme.sketched_sgd");
  CHECK_THAT(Message(SketchedSgdConfig{}.Read(invalid)), Catch::StartsWith("scheme.sketched_sgd.momentum:"));
  ConfigReader unknown(YAML::Load("{momentun: 0.5}"), "scheme.sketched_sgd");
  CHECK_THAT(Message(SketchedSgdConfig{}.Read(unknown)), Catch::Contains("momentun"));

  ConfigReader section(YAML::Load("{name: sketched_sgd, density: 0.05, sketched_sgd: {momentum: 0.8}}"), "scheme");
  auto bound = ParseSchemeSection(section);
  REQUIRE(bound.ok());
  CHECK_FALSE(bound->global_momentum);
  CHECK(std::string(bound->make(SchemeContext{0, 2, 0, 100, {}, 5, 1})->name()) == "sketched_sgd");
}
