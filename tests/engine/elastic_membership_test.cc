// Elastic membership of the phase table (engine/phase_table.h, job key ps.elastic): which workers a
// round waits for, what joins and leaves change, and what the results say, against the naive sums of
// the members' payloads.
#include <cstdint>
#include <numeric>
#include <vector>

#include <catch2/catch.hpp>

#include "common/reason.h"
#include "engine/phase_table.h"
#include "engine/reduce.h"

using namespace sketchps;

namespace {

Contribution Dense(std::vector<float> v, bool auxiliary = false) {
  Contribution c{{Reduction::kDenseSum}, PayloadValue{DenseValues{std::move(v)}}};
  c.spec.final_phase = !auxiliary;
  c.spec.auxiliary = auxiliary;
  return c;
}

PhaseTableOptions Elastic(std::uint32_t slots, std::uint32_t initial, Reducer& reducer) {
  PhaseTableOptions o;
  o.num_workers = slots;
  o.reduce = [&reducer](const PhaseSpec& spec, const std::vector<const Contribution*>& in, const PhaseResult* prev) {
    return reducer.Reduce(spec, in, prev);
  };
  o.elastic = ElasticRoster{initial};
  return o;
}

// Worker w's payload in round r: distinct per (w, r), so a wrong member set gives a wrong sum.
std::vector<float> Payload(std::uint32_t w, std::uint64_t r) {
  return {static_cast<float>(1 + w), static_cast<float>(10 * (r + 1)), static_cast<float>(w * w + r)};
}

// The naive sum of the members' payloads.
std::vector<float> NaiveSum(const std::vector<std::uint32_t>& members, std::uint64_t r) {
  std::vector<float> sum(3, 0.0f);
  for (std::uint32_t w : members) {
    const auto p = Payload(w, r);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += p[i];
  }
  return sum;
}

bool Complete(PhaseTable& table, const PhaseKey& key) {
  return table.Await(key, absl::Now() + absl::Milliseconds(50)).ok();
}

std::shared_ptr<const PhaseResult> Result(PhaseTable& table, const PhaseKey& key) {
  auto r = table.Await(key, absl::Now() + absl::Seconds(5));
  REQUIRE(r.ok());
  return *r;
}

const std::vector<float>& Values(const PhaseResult& r) { return std::get<DenseValues>(r.value).values; }

void Push(PhaseTable& table, std::uint64_t round, std::uint32_t w) {
  REQUIRE(table.Submit(PhaseKey{round, 0}, w, Dense(Payload(w, round))).ok());
}

}  // namespace

TEST_CASE("An elastic round waits for its members only and lists the absent slots", "[elastic]") {
  Reducer reducer(3);
  PhaseTable table(Elastic(4, 2, reducer));
  Push(table, 0, 0);
  CHECK_FALSE(Complete(table, {0, 0}));
  Push(table, 0, 1);
  auto r = Result(table, {0, 0});
  CHECK(Values(*r) == NaiveSum({0, 1}, 0));
  CHECK(r->contributors == 2);
  CHECK(r->absent == std::vector<std::uint32_t>{2, 3});
  CHECK(r->excluded.empty());

  const absl::Status refused = table.Submit(PhaseKey{1, 0}, 3, Dense(Payload(3, 1)));
  CHECK(IsNotMember(refused));
  CHECK(refused.message().find("worker 3") != std::string::npos);
}

TEST_CASE("A joiner is a member from its first round: that round waits for it and sums it", "[elastic]") {
  Reducer reducer(3);
  PhaseTable table(Elastic(3, 2, reducer));
  auto from = table.Join(2, 1);
  REQUIRE(from.ok());
  CHECK(*from == 1);
  CHECK_FALSE(table.IsMember(0, 2));
  CHECK(table.IsMember(1, 2));
  Push(table, 0, 0);
  Push(table, 0, 1);
  CHECK(Values(*Result(table, {0, 0})) == NaiveSum({0, 1}, 0));
  Push(table, 1, 0);
  Push(table, 1, 1);
  CHECK_FALSE(Complete(table, {1, 0}));
  Push(table, 1, 2);
  auto r = Result(table, {1, 0});
  CHECK(Values(*r) == NaiveSum({0, 1, 2}, 1));
  CHECK(r->absent.empty());
  CHECK(table.ActiveMembers() == 3);
}

TEST_CASE("A join skips the rounds that already closed a phase", "[elastic]") {
  Reducer reducer(3);
  PhaseTable table(Elastic(3, 2, reducer));
  for (std::uint32_t w : {0u, 1u}) Push(table, 0, w);
  REQUIRE(Complete(table, {0, 0}));
  CHECK(table.Join(2, 0).value() == 1);
}

TEST_CASE("Moving a join later frees the round that waited for the joiner", "[elastic]") {
  Reducer reducer(3);
  PhaseTable table(Elastic(3, 2, reducer));
  REQUIRE(table.Join(2, 0).value() == 0);
  Push(table, 0, 0);
  Push(table, 0, 1);
  CHECK_FALSE(Complete(table, {0, 0}));
  auto later = table.Join(2, 1);
  REQUIRE(later.ok());
  CHECK(*later == 1);
  auto r = Result(table, {0, 0});
  CHECK(Values(*r) == NaiveSum({0, 1}, 0));
  CHECK(r->absent == std::vector<std::uint32_t>{2});
}

TEST_CASE("A leave completes the open round without the leaver, and it cannot push or rejoin", "[elastic]") {
  Reducer reducer(3);
  PhaseTable table(Elastic(3, 3, reducer));
  Push(table, 0, 0);
  Push(table, 0, 2);
  CHECK_FALSE(Complete(table, {0, 0}));
  REQUIRE(table.Leave(1, 0).ok());
  auto r = Result(table, {0, 0});
  CHECK(Values(*r) == NaiveSum({0, 2}, 0));
  CHECK(r->absent == std::vector<std::uint32_t>{1});
  CHECK(IsNotMember(table.Submit(PhaseKey{1, 0}, 1, Dense(Payload(1, 1)))));
  CHECK(table.Leave(1, 0).ok());  // idempotent
  CHECK(table.Join(1, 2).status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(table.ActiveMembers() == 2);
}

TEST_CASE("A worker that already pushed a round cannot leave before it", "[elastic]") {
  Reducer reducer(3);
  PhaseTable table(Elastic(3, 3, reducer));
  Push(table, 0, 1);
  const absl::Status st = table.Leave(1, 0);
  CHECK(st.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(table.IsMember(0, 1));
  CHECK(table.Leave(1, 1).ok());
}

TEST_CASE("An auxiliary phase waits for the members of its round", "[elastic]") {
  Reducer reducer(3);
  PhaseTable table(Elastic(4, 3, reducer));
  REQUIRE(table.Leave(2, 0).ok());
  REQUIRE(table.Submit(PhaseKey{0, 1}, 0, Dense(Payload(0, 0), true)).ok());
  CHECK_FALSE(Complete(table, {0, 1}));
  REQUIRE(table.Submit(PhaseKey{0, 1}, 1, Dense(Payload(1, 0), true)).ok());
  CHECK(Values(*Result(table, {0, 1})) == NaiveSum({0, 1}, 0));
}

TEST_CASE("A fixed membership refuses joins and leaves, and its roster holds every worker", "[elastic]") {
  Reducer reducer(3);
  PhaseTable table(2, [&reducer](const PhaseSpec& spec, const std::vector<const Contribution*>& in,
                                 const PhaseResult* prev) { return reducer.Reduce(spec, in, prev); });
  CHECK(table.Join(1, 0).status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(table.Leave(1, 0).code() == absl::StatusCode::kFailedPrecondition);
  for (const MemberSpan& m : table.Roster()) CHECK(m == MemberSpan{0, MemberSpan::kNever});
  Push(table, 0, 0);
  Push(table, 0, 1);
  CHECK(Result(table, {0, 0})->absent.empty());
}

TEST_CASE("A restored roster decides the members, and a roster of another size is refused", "[elastic]") {
  Reducer reducer(3);
  PhaseTable table(Elastic(3, 1, reducer));
  CHECK_FALSE(table.SetRoster({MemberSpan{0, 5}}).ok());
  REQUIRE(
      table.SetRoster({MemberSpan{0, MemberSpan::kNever}, MemberSpan{0, 1}, MemberSpan{1, MemberSpan::kNever}}).ok());
  CHECK(table.IsMember(0, 1));
  CHECK_FALSE(table.IsMember(1, 1));
  CHECK(table.IsMember(1, 2));
  CHECK(table.ActiveMembers() == 2);
  Push(table, 0, 0);
  Push(table, 0, 1);
  CHECK(Values(*Result(table, {0, 0})) == NaiveSum({0, 1}, 0));
}
