#include "engine/phase_table.h"

#include <atomic>
#include <thread>

#include <catch2/catch.hpp>

#include "engine/strand.h"

using namespace sketchps;

namespace {

// Sums DenseValues in worker order; counts how often it ran.
struct CountingSum {
  int* calls;
  absl::StatusOr<PhaseResult> operator()(const PhaseSpec&, const std::vector<const Contribution*>& in,
                                         const PhaseResult*) const {
    ++*calls;
    PhaseResult r;
    DenseValues sum{{0.0f}};
    for (const auto* c : in) {
      if (!c->payload) continue;
      sum.values[0] += std::get<DenseValues>(*c->payload).values[0];
      ++r.contributors;
    }
    r.value = sum;
    return r;
  }
};

Contribution Dense(float v) { return Contribution{{Reduction::kDenseSum}, PayloadValue{DenseValues{{v}}}}; }

}  // namespace

TEST_CASE("PhaseTable reduces once when every worker has contributed", "[phase_table]") {
  int calls = 0;
  PhaseTable table(3, CountingSum{&calls});
  const PhaseKey key{5, 0};
  REQUIRE(table.Submit(key, 0, Dense(1)).ok());
  REQUIRE(table.Submit(key, 2, Dense(4)).ok());
  CHECK(table.Await(key, absl::Now() + absl::Milliseconds(20)).status().code() == absl::StatusCode::kDeadlineExceeded);
  REQUIRE(table.Submit(key, 1, Dense(2)).ok());
  auto r = table.Await(key, absl::Now() + absl::Seconds(5));
  REQUIRE(r.ok());
  CHECK(std::get<DenseValues>((*r)->value).values[0] == 7.0f);
  CHECK((*r)->contributors == 3);
  CHECK(calls == 1);
}

TEST_CASE("PhaseTable applies a retried push once", "[phase_table]") {
  int calls = 0;
  PhaseTable table(2, CountingSum{&calls});
  const PhaseKey key{1, 0};
  REQUIRE(table.Submit(key, 0, Dense(1)).ok());
  REQUIRE(table.Submit(key, 0, Dense(100)).ok());  // retry before completion: ignored
  REQUIRE(table.Submit(key, 1, Dense(2)).ok());
  REQUIRE(table.Submit(key, 1, Dense(50)).ok());  // retry after completion: ignored
  auto r = table.Await(key, absl::Now() + absl::Seconds(5));
  REQUIRE(r.ok());
  CHECK(std::get<DenseValues>((*r)->value).values[0] == 3.0f);
  CHECK(calls == 1);
}

TEST_CASE("PhaseTable rejects bad workers, disagreeing specs and stale rounds", "[phase_table]") {
  int calls = 0;
  PhaseTable table(2, CountingSum{&calls});
  CHECK(table.Submit({0, 0}, 2, Dense(1)).code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(table.Submit({0, 0}, 0, Dense(1)).ok());
  const auto other = table.Submit({0, 0}, 1, Contribution{{Reduction::kSparseSum}, std::nullopt});
  CHECK(other.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(other.message()), Catch::Contains("worker 1"));
  for (std::uint64_t round = 1; round <= 10; ++round) {
    REQUIRE(table.Submit({round, 0}, 0, Dense(1)).ok());
    REQUIRE(table.Submit({round, 0}, 1, Dense(1)).ok());
  }
  CHECK(table.Submit({3, 0}, 0, Dense(1)).code() == absl::StatusCode::kFailedPrecondition);
  CHECK(table.Await({3, 0}, absl::Now()).status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(table.HeldPhases() <= PhaseTable::kRetainRounds + 2);  // bounded state
}

TEST_CASE("PhaseTable releases concurrent waiters with one result", "[phase_table]") {
  int calls = 0;
  PhaseTable table(4, CountingSum{&calls});
  std::vector<float> seen(4, -1.0f);
  std::vector<std::thread> threads;
  for (std::uint32_t w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      if (!table.Submit({0, 0}, w, Dense(static_cast<float>(w))).ok()) return;
      auto r = table.Await({0, 0}, absl::Now() + absl::Seconds(10));
      if (r.ok()) seen[w] = std::get<DenseValues>((*r)->value).values[0];
    });
  }
  for (auto& t : threads) t.join();
  CHECK(seen == std::vector<float>(4, 6.0f));
  CHECK(calls == 1);
}

TEST_CASE("PhaseTable counts skipped workers out of contributors", "[phase_table]") {
  int calls = 0;
  PhaseTable table(3, CountingSum{&calls});
  REQUIRE(table.Submit({0, 0}, 0, Dense(1)).ok());
  REQUIRE(table.Submit({0, 0}, 1, Contribution{{Reduction::kDenseSum}, std::nullopt}).ok());
  REQUIRE(table.Submit({0, 0}, 2, Dense(2)).ok());
  auto r = table.Await({0, 0}, absl::Now() + absl::Seconds(5));
  REQUIRE(r.ok());
  CHECK((*r)->contributors == 2);
}

TEST_CASE("PhaseTable needs the previous phase and calls the final hook once per round", "[phase_table]") {
  int calls = 0, finals = 0;
  PhaseTable table(1, CountingSum{&calls},
                   [&](const PhaseKey& key, PhaseResult r) -> absl::StatusOr<std::shared_ptr<const PhaseResult>> {
                     ++finals;
                     if (key.round == 99) return absl::InternalError("hook failed");
                     return std::make_shared<const PhaseResult>(std::move(r));
                   });
  Contribution phase1 = Dense(1);
  phase1.spec.final_phase = true;
  const absl::Status replay = table.Submit({0, 1}, 0, phase1);  // phase 1 without phase 0: a replay
  CHECK(IsReplayRound(replay));
  CHECK_THAT(std::string(replay.message()), Catch::Contains("round 0 phase 1"));
  CHECK(table.HeldPhases() == 0);  // nothing stored: the replayed phase 1 is accepted later
  Contribution phase0 = Dense(1);
  phase0.spec.final_phase = false;
  REQUIRE(table.Submit({1, 0}, 0, phase0).ok());
  REQUIRE(table.Submit({1, 1}, 0, phase1).ok());
  CHECK(table.Await({1, 1}, absl::Now() + absl::Seconds(5)).ok());
  CHECK(finals == 1);
  REQUIRE(table.Submit({99, 0}, 0, Dense(1)).ok());
  CHECK(table.Await({99, 0}, absl::Now() + absl::Seconds(5)).status().code() == absl::StatusCode::kInternal);
}

TEST_CASE("A seeded result answers retries of a restarted shard's last round", "[phase_table]") {
  int calls = 0;
  PhaseTable table(2, CountingSum{&calls});
  auto seeded = std::make_shared<const PhaseResult>(PhaseResult{DenseValues{{7.0f}}, 2});
  table.Seed({4, 1}, seeded);
  REQUIRE(table.Submit({4, 1}, 1, Dense(5)).ok());  // a retry of the seeded phase: acknowledged
  auto r = table.Await({4, 1}, absl::Now() + absl::Seconds(5));
  REQUIRE(r.ok());
  CHECK(std::get<DenseValues>((*r)->value).values == std::vector<float>{7.0f});
  CHECK(calls == 0);                                        // never reduced again
  CHECK(IsReplayRound(table.Submit({5, 1}, 0, Dense(1))));  // the next round starts at phase 0
  REQUIRE(table.Submit({5, 0}, 0, Dense(1)).ok());
  CHECK(!IsReplayRound(absl::FailedPreconditionError("round 1 is stale")));
}

TEST_CASE("Subscribe delivers the result once, now or on completion", "[phase_table]") {
  int calls = 0;
  PhaseTable table(2, CountingSum{&calls});
  std::vector<float> got;
  auto record = [&](absl::StatusOr<std::shared_ptr<const PhaseResult>> r) {
    got.push_back(r.ok() ? std::get<DenseValues>((*r)->value).values[0] : -1.0f);
  };
  table.Subscribe({0, 0}, record);
  REQUIRE(table.Submit({0, 0}, 0, Dense(1)).ok());
  CHECK(got.empty());
  REQUIRE(table.Submit({0, 0}, 1, Dense(2)).ok());
  CHECK(got == std::vector<float>{3.0f});
  table.Subscribe({0, 0}, record);  // already complete: immediate
  CHECK(got == std::vector<float>{3.0f, 3.0f});
  table.Subscribe({1, 0}, record);  // never completes; abandoned when the shard moves on
  REQUIRE(table.Submit({5, 0}, 0, Dense(1)).ok());
  CHECK(got == std::vector<float>{3.0f, 3.0f, -1.0f});
  table.Subscribe({0, 0}, record);  // stale now
  CHECK(got.back() == -1.0f);
}

TEST_CASE("Admission refuses one bad payload alone and the phase completes with the valid ones", "[phase_table]") {
  int calls = 0;
  PhaseTableOptions o;
  o.num_workers = 2;
  o.reduce = CountingSum{&calls};
  o.admit = [](const PhaseSpec&, const PayloadValue& p, const PhaseResult*, const PayloadValue*) {
    return std::get<DenseValues>(p).values[0] < 0 ? absl::InvalidArgumentError("dense.values: negative")
                                                  : absl::OkStatus();
  };
  PhaseTable table(std::move(o));
  REQUIRE(table.Submit({0, 0}, 0, Dense(1)).ok());
  const absl::Status bad = table.Submit({0, 0}, 1, Dense(-1));
  CHECK(bad.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad.message()), Catch::Contains("worker 1") && Catch::Contains("dense.values"));
  CHECK(!table.HasContribution({0, 0}, 1));  // nothing stored for the offender
  REQUIRE(table.Submit({0, 0}, 1, Dense(2)).ok());
  auto r = table.Await({0, 0}, absl::Now() + absl::Seconds(5));
  REQUIRE(r.ok());
  CHECK(std::get<DenseValues>((*r)->value).values[0] == 3.0f);
}

TEST_CASE("With a first round, applied rounds are closed and later rounds wait their turn", "[phase_table]") {
  int calls = 0;
  PhaseTableOptions o;
  o.num_workers = 1;
  o.reduce = CountingSum{&calls};
  o.first_round = 3;
  PhaseTable table(std::move(o));
  CHECK(IsRoundApplied(table.Submit({2, 0}, 0, Dense(1))));
  CHECK(IsRoundAhead(table.Submit({4, 0}, 0, Dense(1))));
  REQUIRE(table.Submit({3, 0}, 0, Dense(1)).ok());  // final (the default spec): round 3 is applied
  REQUIRE(table.Await({3, 0}, absl::Now() + absl::Seconds(5)).ok());
  CHECK(table.rounds_applied() == 4);
  CHECK(table.Submit({3, 0}, 0, Dense(9)).ok());             // a retry of a completed phase: acknowledged
  CHECK(IsRoundApplied(table.Submit({3, 1}, 0, Dense(9))));  // a phase round 3 never had: refused
  Contribution aux = Dense(5);
  aux.spec.final_phase = false;
  aux.spec.auxiliary = true;
  REQUIRE(table.Submit({3, 15}, 0, aux).ok());  // an auxiliary phase of the last applied round
  REQUIRE(table.Await({3, 15}, absl::Now() + absl::Seconds(5)).ok());
  CHECK(IsRoundApplied(table.Submit({2, 15}, 0, aux)));  // ... but not of an older one
  CHECK(table.rounds_applied() == 4);
  CHECK(calls == 2);
}

TEST_CASE("On a strand, reductions run off the submitting threads and results arrive in order", "[phase_table]") {
  Strand strand("test");
  std::atomic<int> on_strand{0};
  PhaseTableOptions o;
  o.num_workers = 2;
  o.reduce = [&](const PhaseSpec& spec, const std::vector<const Contribution*>& in, const PhaseResult* prev) {
    if (strand.InStrand()) ++on_strand;
    int unused = 0;
    return CountingSum{&unused}(spec, in, prev);
  };
  o.strand = &strand;
  PhaseTable table(std::move(o));
  std::vector<float> got;
  absl::Mutex mu;
  for (std::uint64_t round = 0; round < 20; ++round) {
    table.Subscribe({round, 0}, [&](absl::StatusOr<std::shared_ptr<const PhaseResult>> r) {
      absl::MutexLock lock(&mu);
      got.push_back(r.ok() ? std::get<DenseValues>((*r)->value).values[0] : -1.0f);
    });
    REQUIRE(table.Submit({round, 0}, 0, Dense(static_cast<float>(round))).ok());
    REQUIRE(table.Submit({round, 0}, 1, Dense(1)).ok());
    REQUIRE(table.Await({round, 0}, absl::Now() + absl::Seconds(5)).ok());
  }
  strand.Drain();
  CHECK(on_strand.load() == 20);
  absl::MutexLock lock(&mu);
  REQUIRE(got.size() == 20);
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == static_cast<float>(i) + 1.0f);
}
