// Parameter-server training through real gRPC on loopback (servers in this process, one trainer
// thread per worker): dense PS equals single-process SGD with batch P*b, every scheme keeps every
// replica bitwise equal to the servers' master copy (the trainer checks it after every round), and
// the bytes on the wire are the payload bytes each scheme promises plus small framing.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "engine/optimizer.h"
#include "engine/shard.h"
#include "job/job_spec.h"
#include "schemes/registry.h"
#include "support/simulation.h"
#include "support/worker_runs.h"
#include "worker/batch.h"
#include "worker/models.h"
#include "worker/skipped_rounds.h"
#include "worker/trainer.h"

// After libtorch's headers: glog defines a CHECK macro of its own.
#undef CHECK
#include <catch2/catch.hpp>

using namespace sketchps;
using namespace sketchps::worker;
using namespace sketchps::testing;

namespace {

// One process, batch P*b, the same data order and the same replicated optimizer.
std::vector<float> SingleProcess(const JobSpec& job) {
  auto model = Model::Create(job.model, job.train.seed);
  REQUIRE(model.ok());
  auto train = LoadFashionMnist(job.data.path, Split::kTrain);
  REQUIRE(train.ok());
  const std::uint64_t batch = job.workers * job.data.batch_size;
  const auto permutation = EpochPermutation(job.data.train_samples, job.train.seed, 0);
  Optimizer optimizer(job.optimizer, model->flat().dim(), true, job.layout);
  for (std::uint64_t round = 0; round < job.total_rounds(); ++round) {
    auto idx = StepIndices(permutation, round, 0, 1, batch);
    REQUIRE(idx.ok());
    auto b = MakeBatch(*train, *idx);
    REQUIRE(b.ok());
    REQUIRE(model->ForwardBackward(b->input, b->target).ok());
    DenseValues g{std::vector<float>(model->flat().grads(), model->flat().grads() + model->flat().dim())};
    REQUIRE(
        optimizer.Apply(g, model->flat().params(), StepClock{round, EpochOfRound(round, job.rounds_per_epoch())}).ok());
  }
  return std::vector<float>(model->flat().params(), model->flat().params() + model->flat().dim());
}

std::vector<nlohmann::json> ReadRecords(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("Dense PS training over gRPC equals single-process SGD with batch P*b", "[ps][grpc]") {
  for (std::uint32_t workers : {2u, 4u}) {
    const JobSpec job = MlpJob({"workers=" + std::to_string(workers), "scheme.name=dense", "train.rounds=6",
                                "job_id=dense-" + std::to_string(workers)});
    const auto ranks = TrainAllRanks(job);
    for (const auto& r : ranks) CHECK(r.final_weights == ranks[0].final_weights);
    const auto reference = SingleProcess(job);
    const double diff = RelativeError(ranks[0].final_weights, reference);
    INFO("P = " << workers << ": relative difference " << diff);
    CHECK(diff < 1e-5);
    CHECK(RelativeError(reference, SingleProcess(MlpJob({"workers=1", "scheme.name=dense", "train.rounds=1"}))) > 1e-3);
  }
}

TEST_CASE("Dense PS training with AdamW equals single-process AdamW with batch P*b", "[ps][grpc]") {
  // AdamW with its bias corrections, decay exempting the biases, a warm-up and a cosine schedule:
  // every shard's master copy, every replica and the single process apply the same steps.
  const JobSpec job =
      MlpJob({"workers=3", "scheme.name=dense", "train.rounds=8", "job_id=dense-adamw", "optimizer.name=adamw",
              "optimizer.lr=0.003", "optimizer.weight_decay=0.05", "optimizer.no_decay=[fc1.bias, fc2.bias]",
              "optimizer.schedule=cosine", "optimizer.warmup=3 rounds", "optimizer.warmup_start_factor=0.1"});
  const auto ranks = TrainAllRanks(job);
  for (const auto& r : ranks) CHECK(r.final_weights == ranks[0].final_weights);
  const auto reference = SingleProcess(job);
  const double diff = RelativeError(ranks[0].final_weights, reference);
  INFO("relative difference " << diff);
  CHECK(diff < 1e-5);
  // SGD on the same data lands elsewhere: the comparison can tell optimizers apart.
  std::vector<std::string> sgd{"workers=3", "scheme.name=dense", "train.rounds=8", "optimizer.lr=0.003"};
  CHECK(RelativeError(reference, SingleProcess(MlpJob(sgd))) > 1e-3);
}

TEST_CASE("Every scheme keeps replicas equal to the master copy and sends what it promises", "[ps][grpc]") {
  const auto dir = std::filesystem::temp_directory_path() / ("sketchps-ps-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const auto& name : SchemeNames()) {
    DYNAMIC_SECTION(name) {
      const std::string prefix = (dir / (name + "-")).string();
      const JobSpec job = MlpJob({"workers=3", "scheme.name=" + name, "train.rounds=5", "job_id=" + name});
      const auto ranks = TrainAllRanks(job, prefix);  // Train fails on any per-round checksum mismatch
      for (const auto& r : ranks) CHECK(r.final_weights == ranks[0].final_weights);
      for (std::uint32_t rank = 0; rank < job.workers; ++rank) {
        const auto records = ReadRecords(prefix + std::to_string(rank) + ".jsonl");
        REQUIRE(records.size() == 5);
        for (const auto& rec : records) {
          const double raw_up = rec["payload_up"], wire_up = rec["bytes_up"];
          const double raw_down = rec["payload_down"], wire_down = rec["bytes_down"];
          INFO(name << " rank " << rank << " round " << rec["round"] << ": up " << raw_up << " raw / " << wire_up
                    << " wire, down " << raw_down << " / " << wire_down);
          // The promise is the raw arrays (u32 indices, f32 values); the wire codes indices delta +
          // varint and exact-in-half sketch tables as f16, so it may send less, never more than the
          // promise plus headers and framing (about 45 bytes per message).
          CHECK(wire_up <= 1.05 * raw_up + 128);
          CHECK(wire_down <= 1.05 * raw_down + 128);
          CHECK(wire_up > 0);
          CHECK(wire_down > 0);
        }
      }
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("Every scheme runs with AdamW and keeps replicas equal to the master copy", "[ps][grpc][long]") {
  // The local-momentum schemes (DGC, SDAGC, Sketched-SGD) run AdamW with beta1 0: their own
  // momentum correction is the first moment.
  for (const auto& name : SchemeNames()) {
    DYNAMIC_SECTION(name) {
      const JobSpec job =
          MlpJob({"workers=2", "scheme.name=" + name, "train.rounds=4", "job_id=adamw-" + name, "optimizer.name=adamw",
                  "optimizer.lr=0.001", "optimizer.weight_decay=0.01", "optimizer.no_decay=[fc3.bias]"});
      const auto ranks = TrainAllRanks(job);  // Train fails on any per-round checksum mismatch
      REQUIRE(ranks.size() == 2);
      CHECK(ranks[0].final_weights == ranks[1].final_weights);
      CHECK(ranks[0].rounds == 4);
    }
  }
}

TEST_CASE("Rounds skipped for a non-finite gradient are in the records and the error that ends the job", "[ps][grpc]") {
  // A learning rate of 100 makes the MLP's weights grow until its logits overflow: the gradients
  // turn NaN, every worker sits those rounds out, and the final evaluation ends the job.
  const auto dir = std::filesystem::temp_directory_path() / ("sketchps-skip-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string prefix = (dir / "w-").string();
  const JobSpec job = MlpJob({"workers=2", "scheme.name=topk", "train.rounds=12", "optimizer.lr=100"});
  std::string error;
  try {
    TrainAllRanks(job, prefix);
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  for (std::uint32_t rank = 0; rank < job.workers; ++rank) {
    SkippedRounds expected;
    for (const auto& rec : ReadRecords(prefix + std::to_string(rank) + ".jsonl")) {
      expected.Note(rec["round"].get<std::uint64_t>(), rec["skipped"].get<bool>());
    }
    INFO("rank " << rank << ": " << error);
    CHECK(expected.count() > 0);
    if (rank == 0)
      CHECK_THAT(error, Catch::Contains("with " + expected.Describe() + ": ") && Catch::Contains("diverged"));
  }
  std::filesystem::remove_all(dir);
}
