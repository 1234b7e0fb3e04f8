// FetchSGD (docs/methods.md, fetchsgd): against naive host references of "true top-k with virtual
// momentum and virtual error" (an injective sketch) and of the sketch-space update with collisions
// (cells of S(Delta) zeroed in S_u and S_e), stateless workers, the shard's sketch state through a
// snapshot and restore, convergence through the in-process aggregator, and configuration.
#include "schemes/fetchsgd.h"

#include <set>

#include <catch2/catch.hpp>

#include "engine/shard.h"
#include "schemes/registry.h"
#include "support/scheme_checks.h"
#include "support/simulation.h"
#include "support/sketch_schemes.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

FetchSgdConfig Config(double momentum, std::uint32_t rows = 5, std::uint64_t cols = 0) {
  FetchSgdConfig c;
  c.momentum = momentum;
  c.rows = rows;
  c.cols = cols;
  c.table = SketchSizing::Table::kF32;
  return c;
}

SchemeFactory Fetch(const FetchSgdConfig& config = {}, std::uint64_t warmup = 0) {
  return [config, warmup](SchemeContext ctx) {
    ctx.warmup_rounds = warmup;
    return MakeFetchSgdScheme(std::move(ctx), config);
  };
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

// The hash a FetchSGD worker of shard 0 uses for (rows, cols, job seed, d).
CountSketchHash HashOf(std::uint32_t rows, std::uint32_t cols, std::uint64_t seed, std::uint64_t d) {
  auto hash = CountSketchHash::Create({rows, cols, SketchSeed(seed, 0), d});
  REQUIRE(hash.ok());
  return *hash;
}

bool Injective(const CountSketchHash& h) {
  std::set<std::uint32_t> buckets;
  for (std::uint32_t i = 0; i < h.dim(); ++i) buckets.insert(h.Bucket(0, i));
  return buckets.size() == h.dim();
}

std::uint64_t Cell(const CountSketchHash& h, std::uint32_t row, std::uint32_t i) {
  return std::uint64_t{row} * h.cols() + h.Bucket(row, i);
}

}  // namespace

TEST_CASE("FetchSGD with an injective sketch equals true top-k with virtual momentum and virtual error",
          "[schemes][fetchsgd]") {
  // r = 1 and c >= d with a seed whose buckets are all distinct (checked): every estimate is
  // s(i) * s(i) * x_i = x_i exactly, so the sketch-space algorithm must be the vector-space one.
  const float rho = GENERATE(0.0f, 0.5f, 0.9f);
  const std::uint32_t workers = 4;  // the mean S / 4 and the result's * 4 / 4 are exact
  const std::uint64_t d = 60, k = 6;
  const std::uint32_t cols = 4096;
  std::uint64_t seed = 1;
  while (!Injective(HashOf(1, cols, seed, d))) ++seed;
  auto schemes = MakeWorkers(workers, d, k, seed, Fetch(Config(rho, 1, cols)));
  Reducer reducer(d);  // the reduction's state lives here across rounds
  std::mt19937_64 rng(5);
  std::vector<float> u(d, 0.0f), e(d, 0.0f);  // virtual momentum and virtual error, vector space
  for (std::uint64_t round = 0; round < 10; ++round) {
    INFO("rho " << rho << " round " << round);
    std::vector<std::vector<float>> g(workers);
    for (auto& x : g) x = RandomGradient(d, rng);
    const std::vector<float> sum = SumInOrder(g);
    for (std::uint64_t i = 0; i < d; ++i) {
      u[i] = rho * u[i] + 0.25f * sum[i];
      e[i] += u[i];
    }
    auto r = RunManualRound(schemes, reducer, round, g);
    REQUIRE(r.ok());
    REQUIRE(r->specs.size() == 1);
    CHECK(r->specs[0].reduction == Reduction::kSketchMomentumError);
    const auto want = NaiveTopKSorted(e, k);
    for (std::uint32_t w = 0; w < workers; ++w) {
      const auto& got = std::get<SparseVector>(r->aggregates[w]);
      REQUIRE(got.idx == want);
      for (std::size_t t = 0; t < k; ++t) CHECK(got.val[t] == e[want[t]]);  // estimates are exact here
    }
    for (auto i : want) u[i] = e[i] = 0.0f;  // the cells of S(Delta) are exactly Delta's coordinates
    // The reducer's sketches are the sketches of u and e.
    const ReductionState state = reducer.State();
    const auto hash = HashOf(1, cols, seed, d);
    std::vector<float> su(cols, 0.0f), se(cols, 0.0f);
    for (std::uint32_t i = 0; i < d; ++i) {
      su[hash.Bucket(0, i)] = hash.Sign(0, i) * u[i];
      se[hash.Bucket(0, i)] = hash.Sign(0, i) * e[i];
    }
    CHECK(state.momentum == su);
    CHECK(state.error == se);
  }
}

TEST_CASE("FetchSGD with collisions: S_u and S_e follow the sketch-space update, zero on every cell of S(Delta)",
          "[schemes][fetchsgd]") {
  const std::uint32_t workers = 4, rows = 5, cols = 40;
  const std::uint64_t d = 400, k = 8, seed = 3;
  const float rho = 0.9f;
  auto schemes = MakeWorkers(workers, d, k, seed, Fetch(Config(rho, rows, cols)));
  const auto hash = HashOf(rows, cols, seed, d);
  const std::size_t cells = std::size_t{rows} * cols;
  Reducer reducer(d);
  std::mt19937_64 rng(12);
  std::vector<float> su(cells, 0.0f), se(cells, 0.0f);
  for (std::uint64_t round = 0; round < 6; ++round) {
    INFO("round " << round);
    std::vector<std::vector<float>> g(workers);
    for (auto& x : g) x = RandomGradient(d, rng);
    auto r = RunManualRound(schemes, reducer, round, g);
    REQUIRE(r.ok());
    // Reference: the workers' tables summed in order, averaged, folded into S_u and S_e.
    std::vector<float> sum(cells, 0.0f);
    for (std::uint32_t w = 0; w < workers; ++w) {
      const auto& t = std::get<SketchTable>(*r->payloads[0][w]).table;
      for (std::size_t c = 0; c < cells; ++c) sum[c] += t[c];
    }
    for (std::size_t c = 0; c < cells; ++c) {
      su[c] = rho * su[c] + 0.25f * sum[c];
      se[c] += su[c];
    }
    // Delta: the k largest |median estimates| of S_e, with their estimated values.
    std::vector<float> est(d);
    std::vector<float> per_row(rows);
    for (std::uint32_t i = 0; i < d; ++i) {
      for (std::uint32_t j = 0; j < rows; ++j) per_row[j] = hash.Sign(j, i) * se[Cell(hash, j, i)];
      std::sort(per_row.begin(), per_row.end());
      est[i] = per_row[rows / 2];
    }
    const auto want = NaiveTopKSorted(est, k);
    const auto& got = std::get<SparseVector>(r->aggregates[0]);
    REQUIRE(got.idx == want);
    for (std::size_t t = 0; t < k; ++t) CHECK(got.val[t] == est[want[t]]);
    // Every cell S(Delta) touches is zeroed in both sketches; the others keep their update.
    std::set<std::uint64_t> touched;
    for (auto i : want) {
      for (std::uint32_t j = 0; j < rows; ++j) touched.insert(Cell(hash, j, i));
    }
    for (auto c : touched) su[c] = se[c] = 0.0f;
    const ReductionState state = reducer.State();
    CHECK(state.rows == rows);
    CHECK(state.cols == cols);
    CHECK(state.momentum == su);
    CHECK(state.error == se);
    for (auto c : touched) {
      CHECK(state.momentum[c] == 0.0f);
      CHECK(state.error[c] == 0.0f);
    }
    CHECK(touched.size() < cells);  // the check above is not vacuous: other cells stay nonzero
  }
}

TEST_CASE("FetchSGD workers hold no state: fresh and used instances send the same sketch", "[schemes][fetchsgd]") {
  const std::uint64_t d = 200, k = 10;
  auto used = MakeWorkers(2, d, k, 9, Fetch());
  std::mt19937_64 rng(3);
  for (std::uint64_t round = 0; round < 4; ++round) {
    RequireManualRound(used, round, {RandomGradient(d, rng), RandomGradient(d, rng)});
  }
  const SchemeState saved = used[0]->SaveState();
  CHECK(saved.arrays.empty());
  CHECK(saved.scalars.empty());
  auto fresh = MakeWorkers(2, d, k, 9, Fetch());
  const std::vector<std::vector<float>> g = {RandomGradient(d, rng), RandomGradient(d, rng)};
  const auto a = RequireManualRound(used, 4, g);
  const auto b = RequireManualRound(fresh, 4, g);
  CHECK(a.payloads == b.payloads);
  CHECK(a.bytes[0].up == 1 * 200 * 4);  // r x c = 1 x 20k cells (raw f32; the wire codes f16 tables in 2 bytes)
  CHECK(a.bytes[0].down == 8 * k);
  CHECK(fresh[0]->RestoreState(SchemeState{}).ok());
  CHECK_FALSE(fresh[0]->uses_global_momentum());
  CHECK(fresh[0]->reduction_state());
}

namespace {

// One round of the FetchSGD workers through a shard's phase table; returns each worker's contribution.
std::vector<Contribution> ShardRound(Shard& shard, std::vector<std::unique_ptr<Scheme>>& schemes, std::uint64_t round,
                                     const std::vector<std::vector<float>>& g,
                                     const std::vector<Contribution>* replay = nullptr) {
  std::vector<kernels::DeviceArray<float>> d_g;
  std::vector<Contribution> sent;
  for (std::size_t w = 0; w < schemes.size(); ++w) {
    d_g.emplace_back(g[w]);
    REQUIRE(schemes[w]->BeginRound({round, 0.0}, d_g.back().data()).ok());
    auto c = schemes[w]->Contribute(0, nullptr);
    REQUIRE(c.ok());
    sent.push_back(replay ? (*replay)[w] : *c);
  }
  for (std::size_t w = 0; w < schemes.size(); ++w) {
    REQUIRE(shard.table().Submit({round, 0}, static_cast<std::uint32_t>(w), sent[w]).ok());
  }
  auto result = shard.table().Await({round, 0}, absl::Now() + absl::Seconds(10));
  REQUIRE(result.ok());
  for (auto& s : schemes) REQUIRE(s->Finish(**result).ok());
  return sent;
}

}  // namespace

TEST_CASE("FetchSGD: the shard's sketch state survives a snapshot and restore bitwise", "[schemes][fetchsgd][state]") {
  const std::uint32_t workers = 3;
  const std::uint64_t d = 300, k = 15;
  ShardOptions o;
  o.num_workers = workers;
  o.initial_weights.assign(d, 0.0f);
  o.optimizer.lr.base_lr = 0.1;
  o.global_momentum = false;
  Shard original(o);
  auto schemes = MakeWorkers(workers, d, k, 4, Fetch());
  std::mt19937_64 rng(21);
  auto grads = [&] {
    std::vector<std::vector<float>> g(workers);
    for (auto& x : g) x = RandomGradient(d, rng);
    return g;
  };
  for (std::uint64_t round = 0; round < 5; ++round) ShardRound(original, schemes, round, grads());
  const ShardSnapshot snap = original.Snapshot();
  REQUIRE_FALSE(snap.reduction_state.empty());
  CHECK(snap.reduction_state == original.reduction_state());
  // A shard restarted from the snapshot (what the checkpoint holds) continues bitwise as the original.
  ShardOptions r = o;
  r.initial_weights = snap.weights;
  r.optimizer_state = snap.optimizer_state;
  r.rounds_applied = snap.rounds_applied;
  r.reduction_state = snap.reduction_state;
  r.last = snap.last;
  Shard restarted(r);
  CHECK(restarted.reduction_state() == snap.reduction_state);
  // Without the state a restart would diverge: the comparison can tell.
  ShardOptions lost = r;
  lost.reduction_state = {};
  Shard forgetful(lost);
  auto twin = MakeWorkers(workers, d, k, 4, Fetch());
  auto third = MakeWorkers(workers, d, k, 4, Fetch());
  for (std::uint64_t round = 5; round < 9; ++round) {
    const auto g = grads();
    const auto sent = ShardRound(original, schemes, round, g);
    ShardRound(restarted, twin, round, g, &sent);
    ShardRound(forgetful, third, round, g, &sent);
    CHECK(restarted.Weights() == original.Weights());
    CHECK(restarted.reduction_state() == original.reduction_state());
  }
  CHECK(forgetful.Weights() != original.Weights());
  // A state of the wrong size is refused.
  Reducer reducer(d);
  ReductionState bad = snap.reduction_state;
  bad.error.pop_back();
  CHECK(reducer.SetState(bad).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("FetchSGD converges on least squares through the in-process aggregator", "[schemes][fetchsgd][convergence]") {
  // d = 50 in two shards, k = 5 per shard; the defaults r = 1, c = 20k = 100 columns. (r = 5 with c = 4k
  // ends at 0.016 relative error, r = 1 with c = 4k at 0.7: zeroing S(Delta)'s cells wipes k / c of
  // every row each round.)
  auto opts = SchemeOptions(GENERATE(1u, 4u), 2, 400, 0.05, /*momentum=*/0.9);  // optimizer momentum: ignored
  opts.density = 0.2;
  ExpectConvergesOnLeastSquares(Fetch(), opts, 2e-3);
}

TEST_CASE("FetchSGD: a worker with a non-finite gradient skips, replicas stay identical", "[schemes][fetchsgd][nan]") {
  const LeastSquares problem(200, 40, 3);
  auto opts = SchemeOptions(4, 2, 30, 0.05);
  opts.density = 0.2;
  opts.tamper = PoisonGradients({{3, 4, 10, kNaN}, {0, 12, 2, kInf}});
  ExpectSkipsNonFinite(Fetch(), problem, opts);
}

TEST_CASE("FetchSGD configuration: defaults, reading, and errors that name the key", "[schemes][fetchsgd][config]") {
  const FetchSgdConfig defaults;
  CHECK(defaults.rows == 0);  // auto
  CHECK(defaults.cols_factor == 0.0);
  CHECK(defaults.p2 == 0);
  CHECK(defaults.table == SketchSizing::Table::kF16);
  CHECK(defaults.momentum == 0.9);
  CHECK(defaults.Validate("scheme.fetchsgd").ok());
  FetchSgdConfig c;
  c.momentum = 1.0;
  CHECK_THAT(Message(c.Validate("scheme.fetchsgd")), Catch::StartsWith("scheme.fetchsgd.momentum:"));
  c.momentum = -0.1;
  CHECK_THAT(Message(c.Validate("scheme.fetchsgd")), Catch::StartsWith("scheme.fetchsgd.momentum:"));
  c = {};
  c.rows = 65;
  CHECK_THAT(Message(c.Validate("scheme.fetchsgd")), Catch::StartsWith("scheme.fetchsgd.rows:"));
  c = {};
  c.cols = std::uint64_t{1} << 27;  // fits one row, not the 5 rows auto may choose
  CHECK_THAT(Message(c.Validate("scheme.fetchsgd")), Catch::StartsWith("scheme.fetchsgd.cols:"));

  ConfigReader good(YAML::Load("{momentum: 0.5, rows: 3, cols: 64, table: f32}"), "scheme.fetchsgd");
  FetchSgdConfig read;
  REQUIRE(read.Read(good).ok());
  CHECK(read.momentum == 0.5);
  CHECK(read.rows == 3);
  CHECK(read.cols == 64);
  CHECK(read.table == SketchSizing::Table::kF32);
  ConfigReader invalid(YAML::Load("{momentum: 1.5}"), "scheme.fetchsgd");
  CHECK_THAT(Message(FetchSgdConfig{}.Read(invalid)), Catch::StartsWith("scheme.fetchsgd.momentum:"));
  ConfigReader p2(YAML::Load("{p2: 2}"), "scheme.fetchsgd");  // no second phase: not a key here
  CHECK_THAT(Message(FetchSgdConfig{}.Read(p2)), Catch::Contains("p2"));
  ConfigReader table(YAML::Load("{table: f8}"), "scheme.fetchsgd");
  CHECK_THAT(Message(FetchSgdConfig{}.Read(table)), Catch::StartsWith("scheme.fetchsgd.table:"));

  ConfigReader section(YAML::Load("{name: fetchsgd, density: 0.05, fetchsgd: {momentum: 0.8}}"), "scheme");
  auto bound = ParseSchemeSection(section);
  REQUIRE(bound.ok());
  CHECK_FALSE(bound->global_momentum);
  CHECK(bound->reduction_state);
  CHECK(std::string(bound->make(SchemeContext{0, 2, 0, 100, {}, 5, 1})->name()) == "fetchsgd");
  CHECK_THAT(SchemeConfigError("fetchsgd", "{cols_factor: -1}"), Catch::Contains("scheme.fetchsgd.cols_factor"));
  // The low-density warning (measured divergence of one row below k = 0.5% of the range): only for an
  // explicit one-row table there; auto sizing takes 5 rows.
  FetchSgdConfig one_row;
  one_row.rows = 1;
  CHECK_THAT(Fetch(one_row)(SchemeContext{0, 2, 0, 1000, {}, 4, 1})->advisory(), Catch::Contains("scheme.density"));
  CHECK(Fetch(one_row)(SchemeContext{0, 2, 0, 1000, {}, 5, 1})->advisory().empty());
  CHECK(Fetch()(SchemeContext{0, 2, 0, 1000, {}, 1, 1})->advisory().empty());
}

TEST_CASE("FetchSGD auto sizing: one row of 20k from k = 0.5% of the range, 5 rows of 4k below, as sent",
          "[schemes][fetchsgd][config]") {
  struct Case {
    std::uint64_t d, k;
    FetchSgdConfig config;
    std::uint32_t rows, cols;
  };
  FetchSgdConfig three_rows;
  three_rows.rows = 3;  // explicit rows, auto cols_factor: 20 / 3
  FetchSgdConfig wide;
  wide.cols_factor = 8;  // explicit cols_factor, auto rows
  const std::vector<Case> cases = {
      {1000, 5, {}, 1, 100},  // exactly 0.5%: one row
      {1000, 4, {}, 5, 16},   // below: 5 rows, the same 20k cells
      {2000, 10, {}, 1, 200}, {2000, 9, {}, 5, 36},     {1000, 2, three_rows, 3, 14},  // ceil(20 / 3 * 2)
      {1000, 4, wide, 5, 32}, {1000, 50, wide, 1, 400},
  };
  for (const Case& c : cases) {
    INFO("d " << c.d << " k " << c.k << " rows " << c.config.rows << " cols_factor " << c.config.cols_factor);
    const SketchSizing sizing = c.config.SizingFor(c.k, c.d);
    CHECK(sizing.rows == c.rows);
    CHECK(sizing.ColsFor(c.k, c.d) == c.cols);
    // What the workers send: the table of that shape (the reducer takes r and c from it).
    auto schemes = MakeWorkers(2, c.d, c.k, 1, Fetch(c.config));
    std::mt19937_64 rng(3);
    const auto round = RequireManualRound(schemes, 0, {RandomGradient(c.d, rng), RandomGradient(c.d, rng)});
    const auto& table = std::get<SketchTable>(*round.payloads[0][0]);
    CHECK(table.rows == c.rows);
    CHECK(table.cols == c.cols);
  }
}
