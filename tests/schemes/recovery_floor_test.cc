// The recovery floor of the sketch methods (schemes/recovery_floor.h, docs/methods.md "No silent
// divergence"): the controller against a naive reference of its rule, the budget cap, candidates raised
// on a synthetic gradient whose recovery misses, identical specs on every worker (a skipping one too),
// the state round trip and the configuration errors.
#include "schemes/recovery_floor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/reduce.h"
#include "schemes/gs_sgd.h"
#include "schemes/sketched_sgd.h"
#include "support/reference.h"
#include "support/scheme_checks.h"
#include "support/sketch_schemes.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

// The rule of recovery_floor.h, written out plainly over the whole series of returned masses: the K
// of every round (the K that round used) and the windows at K_max that grew.
struct NaiveRun {
  std::vector<std::uint64_t> k;
  std::uint64_t not_held_windows = 0;
};

NaiveRun NaiveFloor(const CandidatePlan& plan, const std::vector<double>& masses) {
  const std::uint64_t configured = std::max<std::uint64_t>(1, std::min(plan.configured, plan.dim));
  const std::uint64_t v = plan.value_bytes;
  const std::uint64_t budget =
      static_cast<std::uint64_t>(std::floor(plan.budget_factor * double(plan.table_bytes + v * configured)));
  std::uint64_t cap = budget > plan.table_bytes ? (budget - plan.table_bytes) / v : 0;
  cap = std::max(configured, std::min(plan.dim, cap));
  const std::uint64_t floor_k =
      std::min<std::uint64_t>(plan.dim, static_cast<std::uint64_t>(std::ceil(plan.floor * double(plan.dim))));
  std::uint64_t k = std::min(std::max(configured, floor_k), cap);
  NaiveRun out;
  std::vector<double> window;  // masses of the current window
  std::vector<double> means;   // window means since the last change
  for (double m : masses) {
    out.k.push_back(k);
    window.push_back(m);
    if (window.size() < plan.window) continue;
    bool overflow = false;
    double log_sum = 0;
    for (double x : window) {
      if (!std::isfinite(x)) overflow = true;
      if (std::isfinite(x)) log_sum += std::log(std::max(x, 1e-300));
    }
    means.push_back(overflow ? std::numeric_limits<double>::max() : std::exp(log_sum / double(window.size())));
    window.clear();
    if (means.size() < 3) continue;  // settling window, reference window
    const double prev = means[means.size() - 2], cur = means.back();
    if (cur == std::numeric_limits<double>::max() || cur > 1.5 * prev) {
      if (k < cap) {
        k = std::min(2 * k, cap);
        means.clear();
      } else {
        ++out.not_held_windows;
      }
    }
  }
  return out;
}

NaiveRun ControllerRun(const CandidatePlan& plan, const std::vector<double>& masses) {
  CandidateController c(plan);
  NaiveRun out;
  for (double m : masses) {
    out.k.push_back(c.candidates());
    c.Observe(m, !std::isfinite(m) && std::isnan(m));
  }
  out.not_held_windows = c.not_held_windows();
  return out;
}

GsSgdConfig Adaptive(double budget_factor, double floor, std::uint64_t window, std::uint32_t p2 = 1,
                     double cols_factor = 1) {
  GsSgdConfig c;
  c.p2 = p2;
  c.cols_factor = cols_factor;
  c.budget_factor = budget_factor;
  c.recovery_floor = floor;
  c.adapt_window = window;
  return c;
}

SchemeFactory GsSgd(const GsSgdConfig& config) {
  return [config](SchemeContext ctx) { return MakeGsSgdScheme(std::move(ctx), config); };
}

std::uint64_t Candidates(const ManualRound& r) { return r.specs.at(0).keep; }

}  // namespace

TEST_CASE("The recovery floor controller follows a naive reference of its rule", "[schemes][recovery_floor]") {
  std::mt19937_64 rng(GENERATE(1u, 2u, 3u, 4u));
  CandidatePlan plan;
  plan.dim = 5000;
  plan.configured = 40;
  plan.table_bytes = 400;
  plan.value_bytes = GENERATE(4u, 2u);  // f32 or f16 candidate values
  plan.budget_factor = GENERATE(1.0, 2.5, 40.0);
  plan.floor = GENERATE(0.0, 0.01, 0.5);
  plan.window = GENERATE(1u, 3u, 7u);
  // Growing, flat and falling stretches, with a few overflowing rounds.
  std::vector<double> masses;
  std::uniform_real_distribution<double> noise(0.8, 1.25);
  double level = 1.0;
  for (int stretch = 0; stretch < 12; ++stretch) {
    const double rate = std::uniform_int_distribution<int>(0, 2)(rng) == 0 ? 1.3 : (stretch % 2 ? 1.0 : 0.97);
    for (int i = 0; i < 15; ++i) {
      level *= rate;
      masses.push_back(level * noise(rng));
    }
  }
  masses[100] = std::numeric_limits<double>::infinity();
  const NaiveRun want = NaiveFloor(plan, masses);
  const NaiveRun got = ControllerRun(plan, masses);
  if (plan.budget_factor == 1.0 && plan.floor == 0.0) {
    // Off: nothing changes and nothing is judged.
    CHECK(std::all_of(got.k.begin(), got.k.end(), [](std::uint64_t k) { return k == 40; }));
    CHECK(got.not_held_windows == 0);
  } else {
    CHECK(got.k == want.k);
    CHECK(got.not_held_windows == want.not_held_windows);
  }
  // Never beyond the budget.
  CandidateController c(plan);
  for (std::uint64_t k : got.k) {
    CHECK(plan.table_bytes + plan.value_bytes * k <= std::max(c.budget_bytes(), c.bytes(40)));
  }
}

TEST_CASE("The budget counts the candidate values' bytes as they travel: 2 with scheme.values f16",
          "[schemes][recovery_floor]") {
  // d = 4000, k = 10, p2 = 2: 20 candidates configured; a 5 x 10 f16 table: 100 bytes. budget_factor 4:
  // 4 x (100 + 4 x 20) = 720 bytes, (720 - 100) / 4 = 155 candidates with f32 values;
  // 4 x (100 + 2 x 20) = 560 bytes, (560 - 100) / 2 = 230 with f16 or bf16 values.
  // recovery_floor 1 starts at K_max, which the first round's phase spec shows.
  const std::uint64_t d = 4000, k = 10;
  struct Case {
    ValueEncoding values;
    std::uint64_t candidates;
  };
  for (const Case& c :
       {Case{ValueEncoding::kF32, 155}, Case{ValueEncoding::kF16, 230}, Case{ValueEncoding::kBF16, 230}}) {
    INFO("values " << static_cast<int>(c.values));
    const GsSgdConfig config = Adaptive(4, 1.0, 20, 2, 1);
    auto schemes = MakeWorkers(2, d, k, 7, [&](SchemeContext ctx) {
      ctx.values = c.values;
      return MakeGsSgdScheme(std::move(ctx), config);
    });
    std::mt19937_64 rng(4);
    const auto r = RequireManualRound(schemes, 0, {RandomGradient(d, rng), RandomGradient(d, rng)});
    CHECK(Candidates(r) == c.candidates);
    CHECK(std::get<DenseValues>(*r.payloads.at(1).at(0)).values.size() == c.candidates);
  }
}

TEST_CASE("The recovery floor starts at the floor's candidates when the budget affords them",
          "[schemes][recovery_floor]") {
  CandidatePlan plan;
  plan.dim = 10000;
  plan.configured = 50;
  plan.table_bytes = 1000;
  plan.floor = 0.01;         // 100 candidates: 1400 bytes
  plan.budget_factor = 1.2;  // 1440 bytes: 110 candidates
  CandidateController fits(plan);
  CHECK(fits.max_candidates() == 110);
  CHECK(fits.candidates() == 100);
  CHECK(fits.floor_fits());
  plan.budget_factor = 1.1;  // 1320 bytes: 80 candidates
  CandidateController short_budget(plan);
  CHECK(short_budget.candidates() == 80);
  CHECK_FALSE(short_budget.floor_fits());
}

TEST_CASE("gs-SGD raises its candidates within the budget when the sketch misses a heavy-tailed gradient",
          "[schemes][recovery_floor]") {
  const std::uint32_t workers = 4;
  const std::uint64_t d = 4000, k = 10;  // p2 = 2, a 5 x 40 sketch: 20 candidates of 4000 entries (0.5%)
  const double budget_factor = 4;
  auto fixed = MakeWorkers(workers, d, k, 3, GsSgd(Adaptive(1, 0, 5, 2, 4)));
  auto adaptive = MakeWorkers(workers, d, k, 3, GsSgd(Adaptive(budget_factor, 0, 5, 2, 4)));
  std::uint64_t last = 0, most_bytes = 0;
  double fixed_residual = 0, adaptive_residual = 0;
  for (std::uint64_t round = 0; round < 200; ++round) {
    std::vector<std::vector<float>> g;
    for (std::uint32_t w = 0; w < workers; ++w) g.push_back(StudentT3(d, 1000 * round + w));
    const ManualRound f = RequireManualRound(fixed, round, g);
    CHECK(Candidates(f) == 20);
    const ManualRound a = RequireManualRound(adaptive, round, g);  // RunManualRound checks the specs agree
    CHECK(Candidates(a) >= last);
    last = Candidates(a);
    most_bytes = std::max(most_bytes, a.bytes[0].up / 2 + a.bytes[1].up);  // f16 table: 2 bytes a cell
    if (round == 199) {
      for (std::uint32_t w = 0; w < workers; ++w) {
        const SchemeState f_state = fixed[w]->SaveState(), a_state = adaptive[w]->SaveState();
        for (float v : f_state.arrays.at("residual")) fixed_residual += double(v) * v;
        for (float v : a_state.arrays.at("residual")) adaptive_residual += double(v) * v;
      }
    }
  }
  // The sizing: 5 rows x 40 columns (f16: 400 bytes) + 4 x 20 candidates = 480 bytes; the budget 1920
  // bytes affords 380 candidates.
  CHECK(last > 20);
  CHECK(last <= 380);
  CHECK(most_bytes <= 1920);
  CHECK(adaptive_residual < fixed_residual);
}

TEST_CASE("A window the budget cannot hold is a typed verdict of that round's diagnostics, alike on every worker",
          "[schemes][recovery_floor]") {
  // budget_factor just above 1: K_max is the configured 20 candidates, so a window that grows is not held.
  const std::uint32_t workers = 4;
  const std::uint64_t d = 4000, k = 10;
  auto schemes = MakeWorkers(workers, d, k, 3, GsSgd(Adaptive(1.001, 0, 5, 2, 4)));
  std::uint64_t verdicts = 0;
  for (std::uint64_t round = 0; round < 200; ++round) {
    std::vector<std::vector<float>> g;
    for (std::uint32_t w = 0; w < workers; ++w) g.push_back(StudentT3(d, 1000 * round + w));
    CHECK(Candidates(RequireManualRound(schemes, round, g)) == 20);
    const RoundDiagnostics first = schemes[0]->diagnostics();
    for (std::uint32_t w = 1; w < workers; ++w) {
      CHECK(schemes[w]->diagnostics().floor_not_held == first.floor_not_held);
      CHECK(schemes[w]->diagnostics().floor_growth == first.floor_growth);
    }
    if (first.floor_not_held == 0) continue;
    INFO("round " << round);
    CHECK(first.floor_not_held == 1);
    CHECK(first.floor_growth > CandidateController::kGrowthLimit);
    ++verdicts;
  }
  // One verdict each time the floor turns not held (as the log's lines); the state counts every such window.
  CHECK(verdicts > 0);
  CHECK(static_cast<double>(verdicts) <= schemes[0]->SaveState().scalars.at("floor.not_held_windows"));
}

TEST_CASE("A recovery that holds keeps the configured candidates", "[schemes][recovery_floor]") {
  // Every entry a candidate would leave nothing to adapt; here a wide sketch finds the heavy entries
  // of gradients whose mass does not grow, so the returned mass levels off.
  const std::uint32_t workers = 4;
  const std::uint64_t d = 400, k = 40;
  auto schemes = MakeWorkers(workers, d, k, 3, GsSgd(Adaptive(4, 0, 10, /*p2=*/4, /*cols_factor=*/20)));
  for (std::uint64_t round = 0; round < 150; ++round) {
    std::vector<std::vector<float>> g;
    for (std::uint32_t w = 0; w < workers; ++w) g.push_back(StudentT3(d, 7000 * round + w));
    CHECK(Candidates(RequireManualRound(schemes, round, g)) == 160);
  }
}

TEST_CASE("Every worker computes the same candidates, one that skips a round too", "[schemes][recovery_floor]") {
  const std::uint32_t workers = 3;
  const std::uint64_t d = 2000, k = 2;
  auto schemes = MakeWorkers(workers, d, k, 9, GsSgd(Adaptive(30, 0, 3)));
  bool raised = false;
  for (std::uint64_t round = 0; round < 60; ++round) {
    std::vector<std::vector<float>> g;
    for (std::uint32_t w = 0; w < workers; ++w) g.push_back(StudentT3(d, 31 * round + w));
    if (round % 7 == 3) g[1][5] = kNaN;  // worker 1 skips: it contributes nothing, but sees G_t
    const ManualRound r = RequireManualRound(schemes, round, g);  // fails when the specs disagree
    raised |= Candidates(r) > 2;
    const auto scalars = schemes[0]->SaveState().scalars;
    REQUIRE(!scalars.empty());
    for (std::uint32_t w = 1; w < workers; ++w) CHECK(schemes[w]->SaveState().scalars == scalars);
  }
  CHECK(raised);
}

TEST_CASE("The recovery floor's state round-trips through Save/Restore", "[schemes][recovery_floor][state]") {
  for (const SchemeFactory& factory : {GsSgd(Adaptive(10, 0, 1)), SchemeFactory([](SchemeContext ctx) {
                                         SketchedSgdConfig c;
                                         c.budget_factor = 10;
                                         c.adapt_window = 1;
                                         return MakeSketchedSgdScheme(std::move(ctx), c);
                                       })}) {
    const std::uint64_t d = 80, k = 8;
    auto a = MakeWorkers(1, d, k, 2, factory);
    auto b = MakeWorkers(1, d, k, 2, factory);
    std::mt19937_64 rng(8);
    // Growing gradients: the candidates change in the first rounds.
    for (std::uint64_t round = 0; round < 6; ++round) {
      auto g = RandomGradient(d, rng);
      for (auto& v : g) v *= float(1 << (2 * round));
      RequireManualRound(a, round, {g});
    }
    const SchemeState saved = a[0]->SaveState();
    CHECK(saved.scalars.at("floor.candidates") > 8);
    REQUIRE(b[0]->RestoreState(saved).ok());
    CHECK(b[0]->SaveState().scalars == saved.scalars);
    for (std::uint64_t round = 6; round < 10; ++round) {
      const std::vector<std::vector<float>> g = {RandomGradient(d, rng)};
      const ManualRound ra = RequireManualRound(a, round, g), rb = RequireManualRound(b, round, g);
      CHECK(ra.specs == rb.specs);
      CHECK(ra.payloads == rb.payloads);
      CHECK(a[0]->SaveState().scalars == b[0]->SaveState().scalars);
      CHECK(a[0]->SaveState().arrays == b[0]->SaveState().arrays);
    }
    SchemeState without = saved;
    without.scalars.clear();
    const auto st = b[0]->RestoreState(without);
    CHECK(st.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(st.message()), Catch::Contains("floor.candidates"));
  }
}

TEST_CASE("The recovery floor's keys are checked and named", "[schemes][recovery_floor]") {
  CHECK(SchemeConfigError("gs_sgd", "{budget_factor: 2, recovery_floor: 0.01, adapt_window: 10}").empty());
  CHECK_THAT(SchemeConfigError("gs_sgd", "{budget_factor: 0.5}"), Catch::StartsWith("scheme.gs_sgd.budget_factor: "));
  CHECK_THAT(SchemeConfigError("sketched_sgd", "{recovery_floor: 1.5}"),
             Catch::StartsWith("scheme.sketched_sgd.recovery_floor: "));
  CHECK_THAT(SchemeConfigError("gs_sgd", "{adapt_window: 0}"), Catch::StartsWith("scheme.gs_sgd.adapt_window: "));
  CHECK_THAT(SchemeConfigError("gs_sgd", "{p2: 0, budget_factor: 2}"),
             Catch::StartsWith("scheme.gs_sgd.budget_factor: "));
  // The budget cannot afford the floor: the advisory says so and names both keys.
  auto s = MakeWorkers(1, 10000, 10, 1, GsSgd(Adaptive(1.5, 0.05, 10, 8, 4)));
  CHECK_THAT(s[0]->advisory(), Catch::Contains("recovery floor cannot hold"));
  CHECK_THAT(s[0]->advisory(), Catch::Contains("budget_factor"));
  CHECK(MakeWorkers(1, 10000, 10, 1, GsSgd(Adaptive(2, 0.01, 10, 8, 4)))[0]->advisory().empty());
}
