// The simulator's batches (sim/batch_source.h): iid is the job's data order exactly (what
// sketchps-worker rank w takes, worker/fashion_mnist.h BatchOrder over session/round_plan.h); a static
// partition hands each worker its own samples, each once per local epoch, whatever the rounds it sits
// out.
#include "sim/batch_source.h"

#include <algorithm>
#include <map>
#include <vector>

#include <catch2/catch.hpp>

using namespace sketchps;
using namespace sketchps::sim;

namespace {

JobSpec Job(std::uint32_t workers, std::uint64_t samples, std::uint32_t batch) {
  auto job = ParseJobSpec("model: mlp\n", "t.yaml",
                          {"workers=" + std::to_string(workers), "data.train_samples=" + std::to_string(samples),
                           "data.batch_size=" + std::to_string(batch), "train.seed=7"});
  REQUIRE(job.ok());
  return *job;
}

std::vector<std::uint8_t> Labels(std::uint64_t n) {
  std::vector<std::uint8_t> labels(n);
  for (std::uint64_t i = 0; i < n; ++i) labels[i] = static_cast<std::uint8_t>((i * 7 + i / 13) % 10);
  return labels;
}

}  // namespace

TEST_CASE("The iid batches are the job's data order, worker by worker", "[sim][batches]") {
  const JobSpec job = Job(4, 1000, 16);  // 15 rounds per epoch: rounds 0..39 cross two epochs
  const auto labels = Labels(1000);
  auto source = BatchSource::Create(job, PartitionSpec{}, labels, 99);
  REQUIRE(source.ok());
  worker::BatchOrder reference(job.train.seed);
  for (std::uint64_t r = 0; r < 40; ++r) {
    for (std::uint32_t w = 0; w < 4; ++w) {
      auto mine = (*source)->Next(w, r);
      REQUIRE(mine.ok());
      const std::vector<std::uint64_t> got(mine->begin(), mine->end());
      auto plan = session::RoundPlan::Initial(job, w);
      REQUIRE(plan.ok());
      auto want = reference.Of(*plan, r);
      REQUIRE(want.ok());
      CHECK(got == std::vector<std::uint64_t>(want->begin(), want->end()));
    }
  }
}

TEST_CASE("A static partition's worker takes each of its samples once per local epoch", "[sim][batches]") {
  const JobSpec job = Job(8, 1000, 16);
  const auto labels = Labels(1000);
  auto spec = ParsePartition("dirichlet:0.5");
  REQUIRE(spec.ok());
  auto source = BatchSource::Create(job, *spec, labels, 3);
  REQUIRE(source.ok());
  // Worker 5 takes part in every third round only; worker 0 in every round.
  std::map<std::uint32_t, std::vector<std::uint64_t>> taken;
  for (std::uint64_t r = 0; r < 90; ++r) {
    for (std::uint32_t w : {0u, 5u}) {
      if (w == 5 && r % 3 != 0) continue;
      auto mine = (*source)->Next(w, r);
      REQUIRE(mine.ok());
      REQUIRE(mine->size() == 16);
      taken[w].insert(taken[w].end(), mine->begin(), mine->end());
    }
  }
  for (std::uint32_t w : {0u, 5u}) {
    INFO("worker " << w);
    const auto held = (*source)->Held(w);
    std::vector<std::uint64_t> sorted_held(held.begin(), held.end());
    std::sort(sorted_held.begin(), sorted_held.end());
    const std::size_t n = held.size();
    REQUIRE(taken[w].size() >= 2 * n);
    for (std::size_t e = 0; e < 2; ++e) {  // each of the first two local epochs is a permutation
      std::vector<std::uint64_t> epoch(taken[w].begin() + e * n, taken[w].begin() + (e + 1) * n);
      CHECK(epoch != std::vector<std::uint64_t>(held.begin(), held.end()));
      std::sort(epoch.begin(), epoch.end());
      CHECK(epoch == sorted_held);
    }
  }
}

TEST_CASE("A worker holding fewer samples than a batch repeats them", "[sim][batches]") {
  const JobSpec job = Job(40, 1000, 32);  // classes:1 over 40 workers: 4 holders per class, ~25 each
  const auto labels = Labels(1000);
  auto source = BatchSource::Create(job, *ParsePartition("classes:1"), labels, 3);
  REQUIRE(source.ok());
  const auto held = (*source)->Held(0);
  REQUIRE(held.size() < 32);
  auto batch = (*source)->Next(0, 0);
  REQUIRE(batch.ok());
  for (auto i : *batch) CHECK(std::find(held.begin(), held.end(), i) != held.end());
  CHECK(std::all_of(batch->begin(), batch->end(), [&](std::uint64_t i) { return labels[i] == labels[held[0]]; }));
}
