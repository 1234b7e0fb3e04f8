// Sitting out (engine/scheme.h RoundInfo::sits_out, the simulator's partial participation): for every
// scheme a worker that sits a round out contributes nothing, keeps its state bitwise, receives the
// same G_t as the others, and the round equals the non-finite-gradient skip; for the schemes whose
// arithmetic does not involve P, a worker that sits out every round leaves the run bitwise equal to a
// run without it; FetchSGD's stateless workers send after a long absence exactly what a new worker
// sends.
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/layout.h"
#include "engine/reduce.h"
#include "job/job_spec.h"
#include "support/scheme_checks.h"
#include "support/sketch_schemes.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

constexpr std::uint64_t kDim = 200;  // one [10, 20] matrix: DGC and SDAGC compress it per layer
constexpr std::uint64_t kK = 10;
constexpr std::uint64_t kSeed = 3;

enum class Absence { kPresent, kSitsOut, kNonFinite };
using Plan = std::function<Absence(std::uint32_t worker, std::uint64_t round)>;

struct Trace {
  std::vector<std::vector<float>> g;                 // [round] worker 0's G_t, densified
  std::vector<std::vector<SchemeState>> states;      // [round][worker] after the round
  std::vector<std::vector<bool>> sent;               // [round][worker] whether it sent a payload
  std::vector<std::vector<std::vector<float>>> all;  // [round][worker] every worker's G_t
};

SchemeMaker MakerOf(const std::string& name) {
  auto job = ParseJobSpec("scheme: {name: " + name + "}\n", "sit_out_test.yaml", {});
  REQUIRE(job.ok());
  return job->scheme.make;
}

std::vector<float> Densify(const Aggregate& g) {
  if (const auto* d = std::get_if<DenseValues>(&g)) return d->values;
  const auto& s = std::get<SparseVector>(g);
  std::vector<float> out(kDim, 0.0f);
  for (std::size_t i = 0; i < s.idx.size(); ++i) out[s.idx[i]] = s.val[i];
  return out;
}

// Worker w's gradient of round r: the same whatever the number of workers.
std::vector<float> Gradient(std::uint32_t w, std::uint64_t r) {
  std::mt19937_64 rng(1000 * r + w);
  return RandomGradient(kDim, rng);
}

// One round of every worker's scheme through `reducer`, phase by phase.
void RunRound(std::vector<std::unique_ptr<Scheme>>& schemes, Reducer& reducer, std::uint64_t round, const Plan& plan,
              Trace& trace) {
  std::vector<kernels::DeviceArray<float>> grads;
  for (std::uint32_t w = 0; w < schemes.size(); ++w) {
    std::vector<float> g = Gradient(w, round);
    if (plan(w, round) == Absence::kNonFinite) g[7] = kNaN;
    grads.emplace_back(g);
    RoundInfo info{round, 0.0, plan(w, round) == Absence::kSitsOut};
    REQUIRE(schemes[w]->BeginRound(info, grads.back().data()).ok());
  }
  trace.sent.emplace_back(schemes.size(), false);
  std::optional<PhaseResult> last;
  for (std::uint32_t p = 0; p < schemes[0]->NumPhases(); ++p) {
    std::vector<Contribution> in;
    for (auto& s : schemes) in.push_back(*s->Contribute(p, last ? &*last : nullptr));
    std::vector<const Contribution*> ptrs;
    for (std::uint32_t w = 0; w < in.size(); ++w) {
      ptrs.push_back(&in[w]);
      if (in[w].payload) trace.sent.back()[w] = true;
    }
    auto r = reducer.Reduce(in.front().spec, ptrs, last ? &*last : nullptr);
    REQUIRE(r.ok());
    last = *std::move(r);
  }
  trace.all.emplace_back();
  trace.states.emplace_back();
  for (auto& s : schemes) {
    auto g = s->Finish(*last);
    REQUIRE(g.ok());
    trace.all.back().push_back(Densify(*g));
    trace.states.back().push_back(s->SaveState());
  }
  trace.g.push_back(trace.all.back().front());
}

Trace Drive(const std::string& name, std::uint32_t workers, std::uint64_t rounds, const Plan& plan) {
  const LayerTable layers = MakeLayerTable({{"w", {10, 20}}});
  std::vector<std::unique_ptr<Scheme>> schemes;
  const SchemeMaker make = MakerOf(name);
  for (std::uint32_t w = 0; w < workers; ++w)
    schemes.push_back(make(SchemeContext{w, workers, 0, kDim, layers, kK, kSeed}));
  Reducer reducer(kDim);
  Trace trace;
  for (std::uint64_t r = 0; r < rounds; ++r) RunRound(schemes, reducer, r, plan, trace);
  return trace;
}

bool SameState(const SchemeState& a, const SchemeState& b) { return a.arrays == b.arrays && a.scalars == b.scalars; }

const std::vector<std::string> kAllSchemes = {"dense",  "topk",  "dgc",      "gtopk", "sketched_sgd",
                                              "gs_sgd", "sdagc", "fetchsgd", "sidco", "scalecom"};

}  // namespace

TEST_CASE("A worker that sits a round out sends nothing, keeps its state and gets the same G_t", "[schemes][sit_out]") {
  const std::string name = GENERATE_REF(from_range(kAllSchemes));
  INFO(name);
  // Worker 2 of 3 sits out rounds 2..5 (a leader among them, for ScaleCom).
  const auto out = [](std::uint32_t w, std::uint64_t r) { return w == 2 && r >= 2 && r <= 5; };
  const Trace t = Drive(
      name, 3, 8, [&](std::uint32_t w, std::uint64_t r) { return out(w, r) ? Absence::kSitsOut : Absence::kPresent; });
  for (std::uint64_t r = 0; r < 8; ++r) {
    INFO("round " << r);
    CHECK(t.sent[r][2] == !out(2, r));
    CHECK(t.sent[r][0]);
    CHECK(t.all[r][2] == t.all[r][0]);  // every replica applies the same G_t
    CHECK(t.all[r][1] == t.all[r][0]);
    if (out(2, r)) CHECK(SameState(t.states[r][2], t.states[1][2]));  // untouched since round 1
  }
  // It takes part again afterwards: its state moves (every scheme but dense and FetchSGD, whose
  // workers keep none, keeps some).
  if (name != "dense" && name != "fetchsgd") CHECK_FALSE(SameState(t.states[6][2], t.states[5][2]));
}

TEST_CASE("Sitting out equals the non-finite gradient's skip, bitwise", "[schemes][sit_out]") {
  const std::string name = GENERATE_REF(from_range(kAllSchemes));
  INFO(name);
  const auto absent = [](std::uint32_t w, std::uint64_t r) { return (w == 1 && r % 3 == 1) || (w == 2 && r >= 4); };
  const Trace sat = Drive(name, 3, 9, [&](std::uint32_t w, std::uint64_t r) {
    return absent(w, r) ? Absence::kSitsOut : Absence::kPresent;
  });
  const Trace nan = Drive(name, 3, 9, [&](std::uint32_t w, std::uint64_t r) {
    return absent(w, r) ? Absence::kNonFinite : Absence::kPresent;
  });
  CHECK(sat.g == nan.g);
  for (std::uint64_t r = 0; r < 9; ++r) {
    for (std::uint32_t w = 0; w < 3; ++w) CHECK(SameState(sat.states[r][w], nan.states[r][w]));
  }
}

TEST_CASE("A worker that always sits out leaves the run as if it did not exist", "[schemes][sit_out]") {
  // Not for the schemes whose arithmetic involves P: ScaleCom's leader is round mod P, and DGC's and
  // SDAGC's local clipping bound is C / sqrt(P) (those are checked against the skip above).
  const std::string name =
      GENERATE(as<std::string>{}, "dense", "topk", "gtopk", "sketched_sgd", "gs_sgd", "fetchsgd", "sidco");
  INFO(name);
  const Trace three =
      Drive(name, 3, 8, [](std::uint32_t w, std::uint64_t) { return w == 2 ? Absence::kSitsOut : Absence::kPresent; });
  const Trace two = Drive(name, 2, 8, [](std::uint32_t, std::uint64_t) { return Absence::kPresent; });
  CHECK(three.g == two.g);
  for (std::uint64_t r = 0; r < 8; ++r) {
    CHECK(SameState(three.states[r][0], two.states[r][0]));
    CHECK(SameState(three.states[r][1], two.states[r][1]));
  }
}

TEST_CASE("A FetchSGD worker back after a long absence sends what a new worker sends", "[schemes][sit_out]") {
  // FetchSGD keeps no worker state: its payload depends on this round's gradient only. Worker 1 takes
  // part in rounds 0..2, sits out 3..9 (worker 0 carries the rounds), and in round 10 must send the
  // table a fresh instance sends.
  const LayerTable layers = MakeLayerTable({{"w", {10, 20}}});
  const SchemeMaker make = MakerOf("fetchsgd");
  auto first = make(SchemeContext{0, 2, 0, kDim, layers, kK, kSeed});
  auto veteran = make(SchemeContext{1, 2, 0, kDim, layers, kK, kSeed});
  auto fresh = make(SchemeContext{1, 2, 0, kDim, layers, kK, kSeed});
  Reducer reducer(kDim);
  for (std::uint64_t r = 0; r <= 10; ++r) {
    const bool away = r >= 3 && r < 10;
    kernels::DeviceArray<float> g0(Gradient(0, r)), g1(Gradient(1, r));
    REQUIRE(first->BeginRound(RoundInfo{r, 0.0}, g0.data()).ok());
    REQUIRE(veteran->BeginRound(RoundInfo{r, 0.0, away}, g1.data()).ok());
    auto c0 = first->Contribute(0, nullptr);
    auto c1 = veteran->Contribute(0, nullptr);
    REQUIRE(c0.ok());
    REQUIRE(c1.ok());
    CHECK(c1->payload.has_value() == !away);
    if (r == 10) {
      REQUIRE(fresh->BeginRound(RoundInfo{r, 0.0}, g1.data()).ok());
      auto n = fresh->Contribute(0, nullptr);
      REQUIRE(n.ok());
      REQUIRE(c1->payload);
      REQUIRE(n->payload);
      CHECK(std::get<SketchTable>(*c1->payload).table == std::get<SketchTable>(*n->payload).table);
    }
    auto res = reducer.Reduce(c0->spec, {&*c0, &*c1}, nullptr);
    REQUIRE(res.ok());
    CHECK(res->contributors == (away ? 1u : 2u));
    REQUIRE(first->Finish(*res).ok());
    REQUIRE(veteran->Finish(*res).ok());
  }
}
