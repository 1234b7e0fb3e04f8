#include "engine/reduce.h"

#include <algorithm>
#include <limits>
#include <map>
#include <random>

#include <catch2/catch.hpp>

#include "common/count_sketch_hash.h"
#include "engine/phase_proto.h"
#include "kernels/count_sketch.h"

using namespace sketchps;

namespace {

Contribution With(Reduction r, PayloadValue p, std::uint64_t keep = 0) {
  return Contribution{{r, keep, 0}, std::move(p)};
}

std::vector<const Contribution*> Ptrs(const std::vector<Contribution>& v) {
  std::vector<const Contribution*> out;
  for (const auto& c : v) out.push_back(&c);
  return out;
}

SparseVector RandomSparse(std::uint64_t dim, std::size_t count, std::mt19937_64& rng) {
  std::map<std::uint32_t, float> m;
  std::uniform_int_distribution<std::uint32_t> pos(0, static_cast<std::uint32_t>(dim - 1));
  std::normal_distribution<float> normal;
  while (m.size() < count) m[pos(rng)] = normal(rng);
  SparseVector s{dim, {}, {}};
  for (auto [i, v] : m) {
    s.idx.push_back(i);
    s.val.push_back(v);
  }
  return s;
}

}  // namespace

TEST_CASE("Dense sum adds in worker order and counts skips", "[reduce]") {
  Reducer r(4);
  PhaseSpec partial{Reduction::kDenseSum};
  partial.final_phase = false;  // a non-final dense sum may be shorter than the range
  std::vector<Contribution> in = {Contribution{partial, DenseValues{{1, 2, 3}}}, Contribution{partial, std::nullopt},
                                  Contribution{partial, DenseValues{{10, 20, 30}}}};
  auto out = r.Reduce(partial, Ptrs(in), nullptr);
  REQUIRE(out.ok());
  CHECK(std::get<DenseValues>(out->value).values == std::vector<float>{11, 22, 33});
  CHECK(out->contributors == 2);
  in[2] = Contribution{partial, DenseValues{{1, 2}}};
  auto bad = r.Reduce(partial, Ptrs(in), nullptr);
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("worker 2") && Catch::Contains("dense.count"));
  // A final dense sum covers the whole range.
  auto short_final =
      r.Reduce({Reduction::kDenseSum}, Ptrs({Contribution{{Reduction::kDenseSum}, DenseValues{{1, 2, 3}}}}), nullptr);
  CHECK_THAT(std::string(short_final.status().message()), Catch::Contains("dense.count: 3 != the range length 4"));
}

TEST_CASE("Admission refuses what could not be reduced with the others, naming the field", "[reduce]") {
  Reducer r(8);
  const PayloadValue sketch = SketchTable{3, 4, 7, 8, std::vector<float>(12, 0.0f)};
  const PhaseSpec recover{Reduction::kSketchRecover, 2};
  CHECK(r.Admit(recover, sketch, nullptr, nullptr).ok());
  auto other_shape = SketchTable{3, 5, 7, 8, std::vector<float>(15, 0.0f)};
  CHECK_THAT(std::string(r.Admit(recover, other_shape, nullptr, &sketch).message()),
             Catch::Contains("sketch.rows/cols/seed"));
  CHECK_THAT(std::string(r.Admit(recover, DenseValues{std::vector<float>(8, 1.0f)}, nullptr, nullptr).message()),
             Catch::Contains("payload: a dense payload in a sketch_recover phase"));
  auto wrong_dim = SketchTable{3, 4, 7, 9, std::vector<float>(12, 0.0f)};
  CHECK_THAT(std::string(r.Admit(recover, wrong_dim, nullptr, nullptr).message()), Catch::Contains("sketch.dim"));
  const PhaseSpec sparse{Reduction::kSparseSum};
  CHECK_THAT(std::string(r.Admit(sparse, SparseVector{8, {3, 1}, {1, 1}}, nullptr, nullptr).message()),
             Catch::Contains("sparse.indices: not strictly increasing"));
  CHECK_THAT(
      std::string(
          r.Admit(sparse, SparseVector{8, {1}, {std::numeric_limits<float>::infinity()}}, nullptr, nullptr).message()),
      Catch::Contains("sparse.values[0] is not finite"));
  PhaseSpec at_previous{Reduction::kDenseSum};
  at_previous.at_previous_indices = true;
  const PhaseResult candidates{IndexSet{8, {1, 4}}, 2};
  CHECK(r.Admit(at_previous, DenseValues{{1, 2}}, &candidates, nullptr).ok());
  CHECK_THAT(std::string(r.Admit(at_previous, DenseValues{{1, 2, 3}}, &candidates, nullptr).message()),
             Catch::Contains("dense.count: 3 != the 2 previous indices"));
}

TEST_CASE("A sum that overflows is refused and an all-skip dense round is empty", "[reduce]") {
  Reducer r(2);
  std::vector<Contribution> huge = {With(Reduction::kDenseSum, DenseValues{{3e38f, 1}}),
                                    With(Reduction::kDenseSum, DenseValues{{3e38f, 1}})};
  auto out = r.Reduce({Reduction::kDenseSum}, Ptrs(huge), nullptr);
  REQUIRE(out.ok());
  CHECK(out->refused);
  CHECK(out->contributors == 0);
  CHECK(std::get<SparseVector>(out->value).idx.empty());
  std::vector<Contribution> skipped = {Contribution{{Reduction::kDenseSum}, std::nullopt}};
  auto none = r.Reduce({Reduction::kDenseSum}, Ptrs(skipped), nullptr);
  REQUIRE(none.ok());
  CHECK(!none->refused);
  CHECK(none->contributors == 0);
  auto g = MeanAggregate(*none, 2);
  REQUIRE(g.ok());
  CHECK(std::get<SparseVector>(*g).idx.empty());
}

TEST_CASE("Sparse sum equals a map reference, with and without keep", "[reduce]") {
  std::mt19937_64 rng(3);
  const std::uint64_t dim = 5000;
  std::vector<Contribution> in;
  std::map<std::uint32_t, float> ref;
  for (int w = 0; w < 4; ++w) {
    auto s = RandomSparse(dim, 300, rng);
    for (std::size_t i = 0; i < s.idx.size(); ++i) ref[s.idx[i]] += s.val[i];
    in.push_back(With(Reduction::kSparseSum, s));
  }
  Reducer r(dim);
  auto all = r.Reduce({Reduction::kSparseSum}, Ptrs(in), nullptr);
  REQUIRE(all.ok());
  const auto& u = std::get<SparseVector>(all->value);
  REQUIRE(u.idx.size() == ref.size());
  std::size_t i = 0;
  for (auto [idx, v] : ref) {
    CHECK(u.idx[i] == idx);
    CHECK(u.val[i] == Approx(v).margin(1e-6));
    ++i;
  }
  auto top = r.Reduce({Reduction::kSparseSum, 50}, Ptrs(in), nullptr);
  REQUIRE(top.ok());
  const auto& t = std::get<SparseVector>(top->value);
  REQUIRE(t.idx.size() == 50);
  float smallest_kept = 1e30f;
  for (float v : t.val) smallest_kept = std::min(smallest_kept, std::fabs(v));
  std::size_t larger = 0;
  for (auto [idx, v] : ref) larger += std::fabs(v) > smallest_kept ? 1 : 0;
  CHECK(larger < 50);  // nothing outside the kept set is larger than what was kept
  CHECK(std::is_sorted(t.idx.begin(), t.idx.end()));
}

TEST_CASE("Sparse sum rejects out-of-range and unsorted indices", "[reduce]") {
  Reducer r(10);
  std::vector<Contribution> in = {With(Reduction::kSparseSum, SparseVector{10, {1, 12}, {1, 1}})};
  auto bad = r.Reduce({Reduction::kSparseSum}, Ptrs(in), nullptr);
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("sparse.indices[1] = 12 >= dim 10"));
  in[0] = With(Reduction::kSparseSum, SparseVector{10, {5, 5}, {1, 1}});
  CHECK_THAT(std::string(r.Reduce({Reduction::kSparseSum}, Ptrs(in), nullptr).status().message()),
             Catch::Contains("not strictly increasing"));
  in[0] = With(Reduction::kSparseSum, DenseValues{{1}});
  CHECK_THAT(std::string(r.Reduce({Reduction::kSparseSum}, Ptrs(in), nullptr).status().message()),
             Catch::Contains("dense payload in a sparse_sum phase"));
}

TEST_CASE("Sketch recover of summed sketches finds the summed heavy hitters", "[reduce]") {
  const std::uint64_t dim = 2000;
  auto hash = CountSketchHash::Create({5, 4000, 11, dim});
  REQUIRE(hash.ok());
  kernels::Scratch scratch;
  kernels::Exec exec{nullptr, &scratch};
  std::vector<Contribution> in;
  for (int w = 0; w < 3; ++w) {
    std::vector<float> x(dim, 0.0f);
    x[100] = 5.0f;       // heavy in every worker
    x[1500 + w] = 1.0f;  // light, different per worker
    kernels::DeviceArray<float> d_x(x), table(hash->cells());
    table.Zero();
    REQUIRE(kernels::SketchAccumulate(d_x.data(), dim, *hash, table.data(), exec).ok());
    in.push_back(With(Reduction::kSketchRecover, SketchTable{5, 4000, 11, dim, table.ToHost()}, 1));
  }
  Reducer r(dim);
  auto out = r.Reduce({Reduction::kSketchRecover, 1}, Ptrs(in), nullptr);
  REQUIRE(out.ok());
  const auto& s = std::get<SparseVector>(out->value);
  REQUIRE(s.idx == std::vector<std::uint32_t>{100});
  CHECK(s.val[0] == Approx(15.0f));
  in[1] = With(Reduction::kSketchRecover, SketchTable{5, 4000, 12, dim, std::vector<float>(20000)}, 1);
  CHECK_THAT(std::string(r.Reduce({Reduction::kSketchRecover, 1}, Ptrs(in), nullptr).status().message()),
             Catch::Contains("worker 1"));
}

TEST_CASE("Leader index set is the leader's, or empty when it skipped", "[reduce]") {
  Reducer r(100);
  std::vector<Contribution> in = {With(Reduction::kLeaderIndexSet, IndexSet{100, {}}),
                                  With(Reduction::kLeaderIndexSet, IndexSet{100, {3, 9, 50}})};
  PhaseSpec spec{Reduction::kLeaderIndexSet, 0, 1};
  auto out = r.Reduce(spec, Ptrs(in), nullptr);
  REQUIRE(out.ok());
  CHECK(std::get<IndexSet>(out->value).idx == std::vector<std::uint32_t>{3, 9, 50});
  in[1].payload.reset();
  CHECK(std::get<IndexSet>(r.Reduce(spec, Ptrs(in), nullptr)->value).idx.empty());
}

TEST_CASE("Indexed dense sum lands at the previous result's indices and keeps the largest", "[reduce]") {
  Reducer r(100);
  const PhaseResult previous{SparseVector{100, {4, 20, 60, 90}, {0, 0, 0, 0}}, 2};
  std::vector<Contribution> in = {With(Reduction::kDenseSum, DenseValues{{1, -5, 2, 0.5f}}),
                                  With(Reduction::kDenseSum, DenseValues{{1, 1, 2, 0.5f}})};
  PhaseSpec spec{Reduction::kDenseSum};
  spec.at_previous_indices = true;
  auto all = r.Reduce(spec, Ptrs(in), &previous);
  REQUIRE(all.ok());
  CHECK(std::get<SparseVector>(all->value) == SparseVector{100, {4, 20, 60, 90}, {2, -4, 4, 1}});
  spec.keep = 2;
  auto top = r.Reduce(spec, Ptrs(in), &previous);
  REQUIRE(top.ok());
  CHECK(std::get<SparseVector>(top->value) == SparseVector{100, {20, 60}, {-4, 4}});  // |-4| ties |4|: both kept
  in[1] = With(Reduction::kDenseSum, DenseValues{{1, 1, 2}});
  CHECK(!r.Reduce(spec, Ptrs(in), &previous).ok());
  CHECK(!r.Reduce(spec, Ptrs(in), nullptr).ok());
}

namespace {

PhaseSpec MomentumErrorSpec(std::uint64_t keep, double rho) {
  PhaseSpec spec{Reduction::kSketchMomentumError, keep};
  spec.momentum = rho;
  return spec;
}

SketchTable RandomTable(std::uint64_t dim, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  SketchTable t{3, 16, 5, dim, std::vector<float>(48)};
  for (auto& v : t.table) v = normal(rng);
  return t;
}

}  // namespace

TEST_CASE("Stateful sketch reduction: pre-summed tables with their count give the per-worker result and state",
          "[reduce]") {
  // The peers all-reduce the tables and hand the Reducer one sum standing for n workers.
  const std::uint64_t dim = 50;
  std::mt19937_64 rng(3);
  Reducer per_worker(dim), pre_summed(dim);
  const PhaseSpec spec = MomentumErrorSpec(4, 0.9);
  for (int round = 0; round < 4; ++round) {
    std::vector<Contribution> in;
    SketchTable sum{3, 16, 5, dim, std::vector<float>(48, 0.0f)};
    for (int w = 0; w < 3; ++w) {
      SketchTable t = RandomTable(dim, rng);
      for (std::size_t c = 0; c < 48; ++c) sum.table[c] += t.table[c];
      in.push_back(Contribution{spec, t});
    }
    in.push_back(Contribution{spec, std::nullopt});  // a skip: 3 contributors of 4
    auto a = per_worker.Reduce(spec, Ptrs(in), nullptr);
    auto b = pre_summed.Reduce(spec, Ptrs({Contribution{spec, sum}}), nullptr, 3u);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(a->contributors == 3);
    CHECK(b->contributors == 3);
    CHECK(std::get<SparseVector>(a->value) == std::get<SparseVector>(b->value));
    CHECK(std::get<SparseVector>(a->value).idx.size() == 4);
    CHECK(per_worker.State() == pre_summed.State());
  }
  // A round in which every worker skipped applies nothing and keeps the state.
  const ReductionState before = per_worker.State();
  auto none = per_worker.Reduce(spec, Ptrs({Contribution{spec, std::nullopt}}), nullptr);
  REQUIRE(none.ok());
  CHECK(std::get<SparseVector>(none->value).idx.empty());
  CHECK(per_worker.State() == before);
  // Tables of another shape than the state's are refused, the state kept.
  SketchTable other{3, 17, 5, dim, std::vector<float>(51, 1.0f)};
  auto bad = per_worker.Reduce(spec, Ptrs({Contribution{spec, other}}), nullptr);
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("reduction state"));
  CHECK(per_worker.State() == before);
  // A non-final phase, or a momentum outside [0, 1), is not admitted.
  PhaseSpec not_final = spec;
  not_final.final_phase = false;
  CHECK(!per_worker.Admit(not_final, other, nullptr, nullptr).ok());
  CHECK(!per_worker.Admit(MomentumErrorSpec(4, 1.0), other, nullptr, nullptr).ok());
  // Clearing the state starts from zeros again.
  REQUIRE(per_worker.SetState({}).ok());
  CHECK(per_worker.State().empty());
}

TEST_CASE("Stateful sketch reduction zeroes the momentum and error cells the recovered update touches", "[reduce]") {
  // One round from a zero state: S_u' = S / n and S_e' = S_u'; Delta = the `keep` largest estimates
  // of S_e'; every cell h_r(i) of every row r and every i of Delta is zeroed in both (FetchSGD's
  // code); every other cell keeps S / n. Reference: the hash's buckets on the host.
  const std::uint64_t dim = 50;
  std::mt19937_64 rng(11);
  Reducer reducer(dim);
  const PhaseSpec spec = MomentumErrorSpec(4, 0.9);
  const SketchTable t = RandomTable(dim, rng);
  auto out = reducer.Reduce(spec, Ptrs({Contribution{spec, t}, Contribution{spec, t}}), nullptr);
  REQUIRE(out.ok());
  const auto& delta = std::get<SparseVector>(out->value);
  REQUIRE(delta.idx.size() == 4);
  auto hash = CountSketchHash::Create({t.rows, t.cols, t.seed, dim});
  REQUIRE(hash.ok());
  std::vector<float> expected(t.table.size());
  for (std::size_t c = 0; c < expected.size(); ++c) expected[c] = (t.table[c] + t.table[c]) * 0.5f;
  for (std::uint32_t i : delta.idx) {
    for (std::uint32_t r = 0; r < t.rows; ++r) expected[r * t.cols + hash->Bucket(r, i)] = 0.0f;
  }
  const ReductionState state = reducer.State();
  CHECK(state.momentum == expected);
  CHECK(state.error == expected);
  CHECK(std::count(expected.begin(), expected.end(), 0.0f) >= 4);
}

TEST_CASE("The momentum of a stateful sketch phase travels on the wire and is refused elsewhere", "[reduce][wire]") {
  const PhaseSpec spec = MomentumErrorSpec(7, 0.75);
  auto back = SpecFromProto(SpecToProto(spec), 4, 100);
  REQUIRE(back.ok());
  CHECK(*back == spec);
  PhaseSpec dense{Reduction::kSparseSum};
  dense.momentum = 0.5;
  CHECK_THAT(std::string(SpecFromProto(SpecToProto(dense), 4, 100).status().message()),
             Catch::Contains("spec.momentum"));
  CHECK_THAT(std::string(SpecFromProto(SpecToProto(MomentumErrorSpec(7, 1.5)), 4, 100).status().message()),
             Catch::Contains("spec.momentum"));
}
