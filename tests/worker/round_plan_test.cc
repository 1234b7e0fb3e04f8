// RoundPlan (session/round_plan.h) against the data order rule of fashion_mnist.h (StepIndices) and
// the servers' EpochOfRound, and what a regroup to fewer workers must keep: no sample twice within
// a data epoch, the fractional epoch continuing, and the job's end.
#include "session/round_plan.h"

#include "worker/fashion_mnist.h"

#undef CHECK
#include <set>

#include <catch2/catch.hpp>

#include "engine/shard.h"

using namespace sketchps;
using namespace sketchps::worker;
using namespace sketchps::session;

namespace {

JobSpec Job(std::uint32_t workers, std::uint64_t samples, std::uint32_t batch, double epochs) {
  auto job = ParseJobSpec("", "t",
                          {"workers=" + std::to_string(workers), "data.train_samples=" + std::to_string(samples),
                           "data.batch_size=" + std::to_string(batch), "train.epochs=" + std::to_string(epochs)});
  REQUIRE(job.ok());
  return *job;
}

// The samples worker `rank` uses in `round` under `plan`.
std::vector<std::uint64_t> Samples(const RoundPlan& plan, std::uint64_t round, std::uint64_t seed) {
  const DataPosition at = plan.At(round);
  const auto perm = EpochPermutation(plan.samples, seed, at.epoch);
  const std::uint64_t first = at.position + plan.rank * plan.batch;
  REQUIRE(first + plan.batch <= perm.size());
  return {perm.begin() + static_cast<std::ptrdiff_t>(first),
          perm.begin() + static_cast<std::ptrdiff_t>(first + plan.batch)};
}

}  // namespace

TEST_CASE("The initial plan is the job's data order rule and the servers' epoch", "[round_plan]") {
  const JobSpec job = Job(3, 1000, 16, 2.5);  // S = floor(1000 / 48) = 20 steps per epoch
  for (std::uint32_t rank = 0; rank < 3; ++rank) {
    auto plan = RoundPlan::Initial(job, rank);
    REQUIRE(plan.ok());
    CHECK(plan->last_round == job.total_rounds());
    for (std::uint64_t round = 0; round < plan->last_round; ++round) {
      const std::uint64_t steps = StepsPerEpoch(1000, 3, 16);
      const auto perm = EpochPermutation(1000, job.train.seed, round / steps);
      auto expected = StepIndices(perm, round % steps, rank, 3, 16);
      REQUIRE(expected.ok());
      CHECK(Samples(*plan, round, job.train.seed) == std::vector<std::uint64_t>(expected->begin(), expected->end()));
      CHECK(plan->EpochOf(round) == EpochOfRound(round, job.rounds_per_epoch()));
    }
  }
}

TEST_CASE("After a regroup the survivors use the rest of the epoch without reusing a sample", "[round_plan]") {
  const JobSpec job = Job(4, 1000, 10, 2.0);  // 25 steps of 40 samples per epoch
  const std::uint64_t at = 30;                // data epoch 1, position 5 * 40 = 200
  std::set<std::uint64_t> epoch1;
  for (std::uint64_t round = 25; round < at; ++round) {
    for (std::uint32_t rank = 0; rank < 4; ++rank) {
      for (auto i : Samples(*RoundPlan::Initial(job, rank), round, 1)) CHECK(epoch1.insert(i).second);
    }
  }
  std::vector<RoundPlan> plans;
  for (std::uint32_t rank = 0; rank < 3; ++rank) {
    auto p = RoundPlan::Initial(job, rank)->Continue(job, at, 3, rank);
    REQUIRE(p.ok());
    plans.push_back(*p);
  }
  const RoundPlan& p = plans[0];
  CHECK(p.At(at).epoch == 1);
  CHECK(p.At(at).position == 200);
  CHECK(p.EpochOf(at) == Approx(30.0 / 25));
  CHECK(p.EpochOf(at + 33) == Approx(30.0 / 25 + 1.0));  // 33 steps of 30 samples per epoch now
  // (1000 - 200) / 30 = 26 rounds finish data epoch 1, then epoch 2 starts at position 0.
  for (std::uint64_t round = at; round < at + 26; ++round) {
    CHECK(p.At(round).epoch == 1);
    for (const auto& plan : plans) {
      for (auto i : Samples(plan, round, 1)) CHECK(epoch1.insert(i).second);
    }
  }
  CHECK(epoch1.size() == 200 + 26 * 30);
  CHECK(p.At(at + 26).epoch == 2);
  CHECK(p.At(at + 26).position == 0);
  // The job ends at 2 epochs: 0.8 epochs left at 33 steps per epoch = ceil(26.4) rounds.
  CHECK(p.last_round == at + 27);
}

TEST_CASE("A job by rounds keeps its last round, and bad memberships are refused", "[round_plan]") {
  auto job = ParseJobSpec("", "t", {"workers=4", "train.rounds=100", "data.train_samples=1000", "data.batch_size=10"});
  REQUIRE(job.ok());
  auto plan = RoundPlan::Initial(*job, 1);
  REQUIRE(plan.ok());
  auto next = plan->Continue(*job, 40, 2, 1);
  REQUIRE(next.ok());
  CHECK(next->last_round == 100);
  CHECK(plan->Continue(*job, 40, 2, 2).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(next->Continue(*job, 39, 2, 0).status().code() == absl::StatusCode::kInvalidArgument);
  auto tiny = ParseJobSpec("", "t", {"workers=4", "data.train_samples=30", "data.batch_size=10"});
  REQUIRE(tiny.ok());
  const auto refused = RoundPlan::Initial(*tiny, 0);
  REQUIRE(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.status().message()), Catch::StartsWith("data.train_samples"));
}

TEST_CASE("With local steps a round's inner steps take the batches of the job without them", "[round_plan]") {
  // H = 3: rounds of 3 * 48 samples, S = floor(1000 / 144) = 6 rounds per epoch. Inner step h of round
  // r is step 3r + h of the job without local steps (20 steps per epoch, 18 of them used).
  auto job = ParseJobSpec(
      "", "t", {"workers=3", "data.train_samples=1000", "data.batch_size=16", "train.epochs=2", "train.local_steps=3"});
  REQUIRE(job.ok());
  CHECK(job->rounds_per_epoch() == 6.0);
  for (std::uint32_t rank = 0; rank < 3; ++rank) {
    auto plan = RoundPlan::Initial(*job, rank);
    REQUIRE(plan.ok());
    CHECK(plan->last_round == 12);
    BatchOrder order(job->train.seed);
    for (std::uint64_t round = 0; round < plan->last_round; ++round) {
      CHECK(plan->EpochOf(round) == EpochOfRound(round, job->rounds_per_epoch()));
      const auto perm = EpochPermutation(1000, job->train.seed, round / 6);
      for (std::uint64_t h = 0; h < 3; ++h) {
        auto expected = StepIndices(perm, (round % 6) * 3 + h, rank, 3, 16);
        REQUIRE(expected.ok());
        auto got = order.Of(*plan, round, h);
        REQUIRE(got.ok());
        CHECK(std::vector<std::uint64_t>(got->begin(), got->end()) ==
              std::vector<std::uint64_t>(expected->begin(), expected->end()));
        CHECK(plan->EpochOf(round, h) == Approx((static_cast<double>(round) + h / 3.0) / 6.0));
      }
    }
  }
  // Every worker needs H batches of its own in the data.
  auto small =
      ParseJobSpec("", "t", {"workers=3", "data.train_samples=100", "data.batch_size=16", "train.local_steps=3"});
  REQUIRE(small.ok());
  const auto refused = RoundPlan::Initial(*small, 0);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("train.local_steps 3"));
}
