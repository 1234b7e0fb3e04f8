// gs-SGD (docs/methods.md, gs_sgd and decision 4): the aggregate against naive host references
// (exact global top-k when the sketch is collision-free; top-p2k estimates then exact top-k with
// collisions), error-feedback conservation, bytes per phase, density 1 == dense, convergence,
// replicas, the NaN guard, warm-up, state round trip and configuration errors.
#include "schemes/gs_sgd.h"

#include <catch2/catch.hpp>

#include "common/wire/codec.h"
#include "schemes/registry.h"
#include "support/scheme_checks.h"
#include "support/simulation.h"
#include "support/sketch_schemes.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

constexpr std::uint64_t kCollisionFree = 1 << 14;  // c >> d: no coordinate collides in 3 of 5 rows

// The exact-top-k variant (keep: top_k, f32 tables, c = 10k), whose aggregate the naive references
// below pin; the defaults (keep: candidates, f16 tables) are checked on their own.
GsSgdConfig Config(std::uint32_t p2, std::uint64_t cols = 0) {
  GsSgdConfig c;
  c.p2 = p2;
  c.cols = cols;
  c.cols_factor = 10;
  c.keep = SketchSizing::Keep::kTopK;
  c.table = SketchSizing::Table::kF32;
  return c;
}

SchemeFactory GsSgd(const GsSgdConfig& config = {}, std::uint64_t warmup = 0) {
  return [config, warmup](SchemeContext ctx) {
    ctx.warmup_rounds = warmup;
    return MakeGsSgdScheme(std::move(ctx), config);
  };
}

std::vector<float> Residual(const Scheme& s) { return s.SaveState().arrays.at("residual"); }

std::string Message(const absl::Status& s) { return std::string(s.message()); }

}  // namespace

TEST_CASE("gs-SGD with a collision-free sketch equals exact global top-k of the summed a", "[schemes][gs_sgd]") {
  const std::uint32_t p2 = GENERATE(0u, 1u, 2u);
  const std::uint32_t workers = 4;
  const std::uint64_t d = 60, k = 6;
  auto schemes = MakeWorkers(workers, d, k, 11, GsSgd(Config(p2, kCollisionFree)));
  Reducer reducer(d);
  std::mt19937_64 rng(5);
  std::vector<std::vector<float>> e(workers, std::vector<float>(d, 0.0f));
  for (std::uint64_t round = 0; round < 8; ++round) {
    std::vector<std::vector<float>> g(workers), a(workers, std::vector<float>(d));
    for (std::uint32_t w = 0; w < workers; ++w) {
      g[w] = RandomGradient(d, rng);
      for (std::uint64_t i = 0; i < d; ++i) a[w][i] = e[w][i] + g[w][i];
    }
    auto r = RunManualRound(schemes, reducer, round, g);
    REQUIRE(r.ok());
    CHECK(r->results.size() == (p2 == 0 ? 1u : 2u));
    const SparseVector want = NaiveTopKMean(SumInOrder(a), k, static_cast<float>(workers));
    for (std::uint32_t w = 0; w < workers; ++w) {
      const auto& got = std::get<SparseVector>(r->aggregates[w]);
      REQUIRE(got.idx == want.idx);
      CHECK(got.val == want.val);  // sketch cells hold single values: the sums are the same floats
      e[w] = a[w];
      for (auto i : want.idx) e[w][i] = 0.0f;
      CHECK(Residual(*schemes[w]) == e[w]);
      CHECK(schemes[w]->selected() == k);
    }
  }
}

TEST_CASE("gs-SGD with collisions: top p2*k sketch estimates, then the exact top-k among them", "[schemes][gs_sgd]") {
  const std::uint32_t p2 = GENERATE(0u, 2u);
  const std::uint32_t workers = 4;
  const std::uint64_t d = 400, k = 8, seed = 3;  // c = 10k = 80 < d: every bucket is shared
  auto schemes = MakeWorkers(workers, d, k, seed, GsSgd(Config(p2)));
  Reducer reducer(d);
  std::mt19937_64 rng(9);
  std::vector<std::vector<float>> g(workers);
  for (auto& x : g) x = RandomGradient(d, rng);
  auto r = RunManualRound(schemes, reducer, 0, g);
  REQUIRE(r.ok());
  auto hash = CountSketchHash::Create({5, 80, SketchSeed(seed, 0), d});
  REQUIRE(hash.ok());
  const auto est = NaiveSketchEstimates(*hash, g);  // of the sum: linearity across workers
  const auto cand = NaiveTopKSorted(est, p2 == 0 ? k : p2 * k);
  REQUIRE(ResultIndices(r->results[0]) != nullptr);
  REQUIRE(*ResultIndices(r->results[0]) == cand);
  const auto& got = std::get<SparseVector>(r->aggregates[0]);
  if (p2 == 0) {
    const auto& first = std::get<SparseVector>(r->results[0].value);  // the estimates end the round
    for (std::size_t t = 0; t < cand.size(); ++t) CHECK(first.val[t] == Approx(est[cand[t]]).margin(1e-4));
    CHECK(got.idx == cand);
    for (std::size_t t = 0; t < cand.size(); ++t) CHECK(got.val[t] == Approx(est[cand[t]] / workers).margin(1e-5));
    return;
  }
  CheckExactTopKAmong(got, cand, SumInOrder(g), k, workers);
}

TEST_CASE("gs-SGD error feedback is exact: sent + residual == e + g", "[schemes][gs_sgd][ef]") {
  const std::uint32_t workers = 3;
  const std::uint64_t d = 200, k = 10;
  auto schemes = MakeWorkers(workers, d, k, 1, GsSgd());
  Reducer reducer(d);
  std::mt19937_64 rng(2);
  std::vector<std::vector<float>> e(workers, std::vector<float>(d, 0.0f));
  std::vector<std::vector<double>> moved(workers, std::vector<double>(d, 0.0)),
      total(workers, std::vector<double>(d, 0.0));
  for (std::uint64_t round = 0; round < 6; ++round) {
    std::vector<std::vector<float>> g(workers);
    for (auto& x : g) x = RandomGradient(d, rng);
    auto r = RunManualRound(schemes, reducer, round, g);
    REQUIRE(r.ok());
    const auto& cand = *ResultIndices(r->results[0]);  // the candidates travel as an index set
    const auto& kept = std::get<SparseVector>(r->aggregates[0]).idx;
    CHECK(kept == cand);  // keep: candidates (the default): every candidate's exact sum is applied
    for (std::uint32_t w = 0; w < workers; ++w) {
      const auto& sent = std::get<DenseValues>(*r->payloads[1][w]).values;
      REQUIRE(sent.size() == cand.size());
      const auto residual = Residual(*schemes[w]);
      std::vector<float> rebuilt = residual;
      for (std::size_t t = 0; t < cand.size(); ++t) {
        const bool taken = std::binary_search(kept.begin(), kept.end(), cand[t]);
        if (!taken) continue;
        CHECK(residual[cand[t]] == 0.0f);
        rebuilt[cand[t]] = sent[t];
        moved[w][cand[t]] += sent[t];
      }
      for (std::uint64_t i = 0; i < d; ++i) {
        CHECK(rebuilt[i] == e[w][i] + g[w][i]);  // bitwise: values are moved, never recomputed
        total[w][i] += g[w][i];
      }
      e[w] = residual;
    }
  }
  for (std::uint32_t w = 0; w < workers; ++w) {  // over time: everything taken plus the residual
    for (std::uint64_t i = 0; i < d; ++i) CHECK(moved[w][i] + e[w][i] == Approx(total[w][i]).margin(1e-4));
  }
}

TEST_CASE("gs-SGD bytes per phase follow the documented formulas", "[schemes][gs_sgd][bytes]") {
  for (std::uint32_t p2 : {0u, 2u, 3u}) CheckSketchPhaseBytes(3, p2, GsSgd(Config(p2)));  // K = p2*k
  // Through the in-process aggregator, 2 shards of 500 (k = 5, c = 50, K = 10), summed over shards.
  auto sim = Simulate(GsSgd(Config(2)), LeastSquares(100, 1000, 1), [] {
    auto o = SchemeOptions(3, 2, 3);
    o.density = 0.01;
    return o;
  }());
  REQUIRE(sim.status.ok());
  CHECK(sim.traffic[1].bytes_up == 2 * (5 * 50 * 4 + 4 * 10));
  CHECK(sim.traffic[1].bytes_down == 2 * (4 * 10 + 8 * 5));  // candidates as an index set, then k pairs
}

TEST_CASE("gs-SGD at density 1 equals dense", "[schemes][gs_sgd][dense]") {
  const std::uint32_t p2 = GENERATE(1u, 2u);  // K = min(p2 * d, d) = d: every entry is a candidate
  auto opts = SchemeOptions(4, 2, 20);
  opts.density = 1.0;
  ExpectMatches(LeastSquares(200, 30, 2), GsSgd(Config(p2)), Dense(), opts, 1e-6);
}

TEST_CASE("gs-SGD converges on least squares with sketch collisions", "[schemes][gs_sgd][convergence]") {
  auto opts = SchemeOptions(GENERATE(1u, 4u, 8u), 1, 300);
  opts.density = 0.1;  // k = 5, c = 50 = d: realistic collisions
  ExpectConvergesOnLeastSquares(GsSgd(), opts, 1e-3);
}

TEST_CASE("gs-SGD converges on logistic regression with sketch collisions", "[schemes][gs_sgd][convergence]") {
  auto opts = SchemeOptions(GENERATE(1u, 4u, 8u), 1, 300, /*lr=*/1.0, /*momentum=*/0.0);
  opts.density = 0.2;  // k = 6, c = 60
  ExpectConvergesOnLogistic(GsSgd(), opts, 1e-3);
}

TEST_CASE("gs-SGD: a worker with a non-finite gradient skips, replicas stay identical", "[schemes][gs_sgd][nan]") {
  const LeastSquares problem(200, 40, 3);
  auto opts = SchemeOptions(4, 2, 30);
  opts.density = 0.2;
  opts.tamper = PoisonGradients({{1, 7, 3, kNaN}, {2, 9, 5, -kInf}});
  for (std::uint32_t p2 : {0u, 2u}) ExpectSkipsNonFinite(GsSgd(Config(p2)), problem, opts);
}

TEST_CASE("gs-SGD dense warm-up rounds send everything, then sketches", "[schemes][gs_sgd][warmup]") {
  const LeastSquares problem(100, 40, 1);
  auto opts = SchemeOptions(2, 1, 5);
  opts.density = 0.1;  // k = 4, c = 40, K = 8
  auto r = Simulate(GsSgd(Config(2), /*warmup=*/2), problem, opts);
  REQUIRE(r.status.ok());
  CHECK(r.replicas_identical);
  for (std::uint64_t round = 0; round < 5; ++round) {
    CHECK(r.traffic[round].bytes_up == (round < 2 ? 4 * 40 : 5 * 40 * 4 + 4 * 8));
    CHECK(r.selected[round] == (round < 2 ? 40u : 4u));
  }
}

TEST_CASE("gs-SGD state round-trips through Save/Restore", "[schemes][gs_sgd][state]") {
  const auto b = CheckStateRoundTrip(GsSgd());
  SchemeState missing;
  CHECK(b->RestoreState(missing).code() == absl::StatusCode::kInvalidArgument);
  SchemeState short_state{{{"residual", std::vector<float>(79)}}, {}};  // d = 80
  const auto bad = b->RestoreState(short_state);
  CHECK(bad.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(Message(bad), Catch::Contains("residual") && Catch::Contains("79"));
}

TEST_CASE("gs-SGD configuration: defaults, reading, and errors that name the key", "[schemes][gs_sgd][config]") {
  const GsSgdConfig defaults;
  CHECK(defaults.rows == 5);
  CHECK(defaults.cols_factor == 4.0);
  CHECK(defaults.cols == 0);
  CHECK(defaults.p2 == 8);
  CHECK(defaults.keep == SketchSizing::Keep::kCandidates);
  CHECK(defaults.table == SketchSizing::Table::kF16);
  CHECK(defaults.Validate("scheme.gs_sgd").ok());
  auto bad = [](auto mutate) {
    GsSgdConfig c;
    mutate(c);
    return Message(c.Validate("scheme.gs_sgd"));
  };
  CHECK_THAT(bad([](GsSgdConfig& c) { c.rows = 0; }), Catch::StartsWith("scheme.gs_sgd.rows:"));
  CHECK_THAT(bad([](GsSgdConfig& c) { c.rows = 65; }), Catch::StartsWith("scheme.gs_sgd.rows:"));
  CHECK_THAT(bad([](GsSgdConfig& c) { c.cols_factor = 0.0; }), Catch::StartsWith("scheme.gs_sgd.cols_factor:"));
  CHECK_THAT(bad([](GsSgdConfig& c) { c.cols = std::uint64_t{1} << 30; }), Catch::StartsWith("scheme.gs_sgd.cols:"));
  CHECK_THAT(bad([](GsSgdConfig& c) { c.p2 = 5000; }), Catch::StartsWith("scheme.gs_sgd.p2:"));

  ConfigReader good(YAML::Load("{rows: 7, cols: 300, p2: 0}"), "scheme.gs_sgd");
  GsSgdConfig read;
  REQUIRE(read.Read(good).ok());
  CHECK(read.rows == 7);
  CHECK(read.cols == 300);
  CHECK(read.p2 == 0);
  ConfigReader unknown(YAML::Load("{rows: 5, colz: 3}"), "scheme.gs_sgd");
  CHECK_THAT(Message(GsSgdConfig{}.Read(unknown)), Catch::Contains("scheme.gs_sgd") && Catch::Contains("colz"));
  ConfigReader invalid(YAML::Load("{rows: 0}"), "scheme.gs_sgd");
  CHECK_THAT(Message(GsSgdConfig{}.Read(invalid)), Catch::StartsWith("scheme.gs_sgd.rows:"));
  ConfigReader variant(YAML::Load("{keep: top_k, table: f32}"), "scheme.gs_sgd");
  GsSgdConfig v;
  REQUIRE(v.Read(variant).ok());
  CHECK(v.keep == SketchSizing::Keep::kTopK);
  CHECK(v.table == SketchSizing::Table::kF32);
  ConfigReader bad_keep(YAML::Load("{keep: all}"), "scheme.gs_sgd");
  CHECK(Message(GsSgdConfig{}.Read(bad_keep)) == "scheme.gs_sgd.keep: 'all' is not top_k or candidates");
  ConfigReader bad_table(YAML::Load("{table: f8}"), "scheme.gs_sgd");
  CHECK(Message(GsSgdConfig{}.Read(bad_table)) == "scheme.gs_sgd.table: 'f8' is not f32 or f16");

  ConfigReader section(YAML::Load("{name: gs_sgd, density: 0.05, gs_sgd: {p2: 3}}"), "scheme");
  auto bound = ParseSchemeSection(section);
  REQUIRE(bound.ok());
  CHECK(bound->global_momentum);
  CHECK(std::string(bound->make(SchemeContext{0, 2, 0, 100, {}, 5, 1})->name()) == "gs_sgd");
}

TEST_CASE("gs-SGD sketch sizes fit the wire: derived sizes are clamped, explicit ones refused", "[schemes][gs_sgd]") {
  // 8 cells per entry is what the decoders accept: 5 rows x 160 columns for 100 entries.
  GsSgdConfig derived;  // c = 4k = 400 for k = d = 100
  auto fits = MakeGsSgdScheme(SchemeContext{0, 1, 0, 100, {}, 100, 1}, derived);
  CHECK(fits->wire_status().ok());
  GsSgdConfig given;
  given.cols = 161;
  auto big = MakeGsSgdScheme(SchemeContext{0, 1, 0, 100, {}, 100, 1}, given);
  CHECK(Message(big->wire_status()) ==
        "a sketch of 5 rows x 161 columns (805 cells) is more than a range of 100 entries may send (8 cells per "
        "entry): lower cols, cols_factor or rows");
  CHECK(SketchSizing{}.ColsFor(100, 100) == 160);
  CHECK(SketchSizing{}.ColsFor(10, 100) == 40);
}

TEST_CASE("gs-SGD defaults: f16 tables and every candidate's exact sum applied", "[schemes][gs_sgd]") {
  const std::uint32_t workers = 3;
  const std::uint64_t d = 2000, k = 10;  // K = 8k = 80 candidates from a 5 x 40 table
  auto schemes = MakeWorkers(workers, d, k, 7, GsSgd());
  std::mt19937_64 rng(3);
  std::vector<std::vector<float>> g(workers);
  for (auto& x : g) x = RandomGradient(d, rng);
  const auto r = RequireManualRound(schemes, 0, g);
  REQUIRE(r.results.size() == 2);
  // Every cell of the table is exact in binary16, so it travels in 2 bytes a cell.
  const auto& table = std::get<SketchTable>(*r.payloads[0][0]);
  CHECK(table.cols == 40);
  CHECK(ExactInHalf(table.table));
  const auto& cand = std::get<IndexSet>(r.results[0].value).idx;
  CHECK(cand.size() == 8 * k);
  const auto sum = SumInOrder(g);
  const auto& got = std::get<SparseVector>(r.aggregates[0]);
  REQUIRE(got.idx == cand);
  for (std::size_t t = 0; t < cand.size(); ++t) CHECK(got.val[t] == sum[cand[t]] / static_cast<float>(workers));
  CHECK(schemes[0]->selected() == cand.size());
}
