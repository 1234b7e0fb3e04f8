// The peer collectives over real gRPC on loopback, phase by phase, against the parameter server's
// Reducer (worker-id order) on the same contributions. Sums use dyadic values (small multiples of
// 1/8), whose float sums are exact in any order, so every collective must match the PS bitwise;
// with arbitrary floats sums match within rounding. Skipping workers are included.
#include <cmath>
#include <random>

#include <catch2/catch.hpp>

#include "engine/reduce.h"
#include "peer_group.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

constexpr std::uint64_t kDim = 40;

float Dyadic(std::mt19937_64& rng) { return static_cast<float>(static_cast<int>(rng() % 129) - 64) / 8.0f; }

PayloadValue MakePayload(Reduction r, std::mt19937_64& rng, bool dyadic) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto value = [&] { return dyadic ? Dyadic(rng) : normal(rng); };
  switch (r) {
    case Reduction::kDenseSum: {
      DenseValues d;
      for (std::uint64_t i = 0; i < kDim; ++i) d.values.push_back(value());
      return d;
    }
    case Reduction::kSketchRecover: {
      SketchTable t{3, 16, 99, kDim, {}};
      for (int i = 0; i < 3 * 16; ++i) t.table.push_back(value());
      return t;
    }
    case Reduction::kSparseSum: {
      SparseVector s{kDim, {}, {}};
      for (std::uint32_t i = 0; i < kDim; ++i) {
        if (rng() % 3 == 0) {
          s.idx.push_back(i);
          s.val.push_back(value());
        }
      }
      return s;
    }
    case Reduction::kLeaderIndexSet: {
      IndexSet s{kDim, {}};
      for (std::uint32_t i = 0; i < kDim; i += 1 + rng() % 4) s.idx.push_back(i);
      return s;
    }
    case Reduction::kSketchMomentumError: break;  // a stateful reduction: not one of the collective's stateless phases
  }
  return DenseValues{};
}

struct Outcome {
  std::vector<absl::StatusOr<std::shared_ptr<const PhaseResult>>> peer;
  PhaseResult ps;
};

// Every rank runs one phase (round `round`) with contributions[rank]; the PS reference reduces them.
Outcome RunPhase(PeerGroup& group, std::uint64_t round, const std::vector<Contribution>& contributions) {
  const std::uint32_t p = group.size();
  Outcome out;
  out.peer.assign(p, absl::UnknownError("not run"));
  RunRanks(AllRanks(p),
           [&](std::uint32_t r) { out.peer[r] = group.aggregator(r).RunPhase(0, round, 0, contributions[r]); });
  std::vector<const Contribution*> ptrs;
  for (const auto& c : contributions) ptrs.push_back(&c);
  Reducer reducer(kDim);
  auto ps = reducer.Reduce(contributions[0].spec, ptrs, nullptr);
  REQUIRE(ps.ok());
  out.ps = *ps;
  return out;
}

std::vector<Contribution> Contributions(std::uint32_t p, const PhaseSpec& spec, std::uint64_t seed, bool dyadic,
                                        std::uint32_t skipper) {
  std::mt19937_64 rng(seed);
  std::vector<Contribution> in;
  for (std::uint32_t w = 0; w < p; ++w) {
    Contribution c{spec, MakePayload(spec.reduction, rng, dyadic)};
    if (spec.reduction == Reduction::kLeaderIndexSet && w != spec.leader) c.payload = IndexSet{kDim, {}};
    if (w == skipper) c.payload.reset();
    in.push_back(std::move(c));
  }
  return in;
}

double MaxAbsDiff(const PayloadValue& a, const PayloadValue& b) {
  const auto* x = std::get_if<SparseVector>(&a);
  const auto* y = std::get_if<SparseVector>(&b);
  if (x && y && x->idx == y->idx) {
    double m = 0;
    for (std::size_t i = 0; i < x->val.size(); ++i)
      m = std::max(m, static_cast<double>(std::fabs(x->val[i] - y->val[i])));
    return m;
  }
  const auto* u = std::get_if<DenseValues>(&a);
  const auto* v = std::get_if<DenseValues>(&b);
  if (u && v && u->values.size() == v->values.size()) {
    double m = 0;
    for (std::size_t i = 0; i < u->values.size(); ++i) {
      m = std::max(m, static_cast<double>(std::fabs(u->values[i] - v->values[i])));
    }
    return m;
  }
  return INFINITY;
}

const std::vector<PhaseSpec>& Specs() {
  static const std::vector<PhaseSpec> specs = {
      {Reduction::kDenseSum},     {Reduction::kSketchRecover, 12},    {Reduction::kSparseSum},
      {Reduction::kSparseSum, 5}, {Reduction::kLeaderIndexSet, 0, 1},
  };
  return specs;
}

}  // namespace

TEST_CASE("Peer collectives equal the PS reduction bitwise for P = 2..8 with skips", "[peer][grpc]") {
  for (std::uint32_t p = 2; p <= 8; ++p) {
    PeerGroup group(p, PeerBase("collectives", {kDim}));
    std::uint64_t round = 0;
    std::vector<PhaseSpec> specs = Specs();
    specs.push_back({Reduction::kLeaderIndexSet, 0, p - 1});  // for P = 3, 5, 6, 7 a folded rank leads
    for (const auto& spec : specs) {
      for (std::uint32_t skipper : {p, 0u, p - 1}) {  // p: nobody skips
        const auto in = Contributions(p, spec, 1000 * p + round, /*dyadic=*/true, skipper);
        const Outcome out = RunPhase(group, round++, in);
        for (std::uint32_t r = 0; r < p; ++r) {
          INFO("P " << p << ", " << ReductionName(spec.reduction) << " keep " << spec.keep << ", skipper " << skipper
                    << ", rank " << r << ": " << out.peer[r].status());
          REQUIRE(out.peer[r].ok());
          CHECK((*out.peer[r])->value == out.ps.value);
          CHECK((*out.peer[r])->contributors == out.ps.contributors);
        }
      }
    }
  }
}

TEST_CASE("Peer sums of arbitrary floats are identical on every rank and within rounding of the PS", "[peer][grpc]") {
  for (std::uint32_t p : {3u, 5u, 8u}) {
    PeerGroup group(p, PeerBase("float-sums", {kDim}));
    std::uint64_t round = 0;
    for (const auto& spec : {PhaseSpec{Reduction::kDenseSum}, PhaseSpec{Reduction::kSparseSum}}) {
      const auto in = Contributions(p, spec, 77 + p, /*dyadic=*/false, p);
      const Outcome out = RunPhase(group, round++, in);
      for (std::uint32_t r = 0; r < p; ++r) {
        INFO("P " << p << ", " << ReductionName(spec.reduction) << ", rank " << r);
        REQUIRE(out.peer[r].ok());
        CHECK((*out.peer[r])->value == (*out.peer[0])->value);
        const double diff = MaxAbsDiff((*out.peer[r])->value, out.ps.value);
        CHECK(diff <= 1e-5);
        if (spec.reduction == Reduction::kSparseSum) CHECK(diff == 0.0);  // all-gather: bitwise
      }
    }
  }
}

TEST_CASE("gTop-k tree merge is equal on every rank and the PS result for P = 2 and differs as documented",
          "[peer][grpc][gtopk]") {
  SECTION("P = 2 and P = 4 on random payloads") {
    for (std::uint32_t p : {2u, 4u}) {
      PeerGroup group(p, PeerBase("gtopk-tree", {kDim}, absl::Seconds(20), /*sparse_tree_merge=*/true));
      const PhaseSpec spec{Reduction::kSparseSum, 6};
      const auto in = Contributions(p, spec, 5 + p, /*dyadic=*/false, p);
      const Outcome out = RunPhase(group, 0, in);
      for (std::uint32_t r = 0; r < p; ++r) {
        REQUIRE(out.peer[r].ok());
        CHECK((*out.peer[r])->value == (*out.peer[0])->value);
        CHECK((*out.peer[r])->contributors == p);
        CHECK(std::get<SparseVector>((*out.peer[r])->value).idx.size() <= 6);
      }
      if (p == 2) CHECK((*out.peer[0])->value == out.ps.value);
    }
  }
  SECTION("P = 4, k = 1: the tree drops index 0 early, the PS keeps it") {
    // Ranks hold {0: 3}, {1: 4}, {0: 3}, {1: -4}. Tree: (0,1) keeps {1: 4}, (2,3) keeps {1: -4}; their
    // merge cancels to nothing. PS: the union sum is {0: 6, 1: 0}, whose top-1 is {0: 6}.
    PeerGroup group(4, PeerBase("gtopk-example", {kDim}, absl::Seconds(20), /*sparse_tree_merge=*/true));
    const PhaseSpec spec{Reduction::kSparseSum, 1};
    std::vector<Contribution> in = {{spec, SparseVector{kDim, {0}, {3}}},
                                    {spec, SparseVector{kDim, {1}, {4}}},
                                    {spec, SparseVector{kDim, {0}, {3}}},
                                    {spec, SparseVector{kDim, {1}, {-4}}}};
    const Outcome out = RunPhase(group, 0, in);
    CHECK(out.ps.value == PayloadValue{SparseVector{kDim, {0}, {6}}});
    for (std::uint32_t r = 0; r < 4; ++r) {
      REQUIRE(out.peer[r].ok());
      CHECK((*out.peer[r])->value == PayloadValue{SparseVector{kDim, {}, {}}});
    }
  }
}
