// train.local_steps (worker/local_steps.h): workers take H inner steps, exchange the pseudo-gradient
// and apply the outer optimizer to the round's start. Checked against a naive reference written out
// here (H inner momentum-SGD steps per worker on its batches, the mean pseudo-gradient, a Nesterov
// outer step) in both modes through real gRPC on loopback; H = 1 with `average` against the job
// without the keys, bit for bit; and a worker killed and restarted with its state directory against
// the fault-free run, bit for bit.
#include "worker/local_steps.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include <ATen/Parallel.h>

#include "absl/strings/str_cat.h"
#include "job/job_spec.h"
#include "launch/ports.h"
#include "schemes/registry.h"
#include "support/device_memory.h"
#include "support/simulation.h"
#include "support/worker_runs.h"
#include "worker/batch.h"
#include "worker/models.h"
#include "worker/trainer.h"

// After libtorch's headers: glog defines a CHECK macro of its own.
#undef CHECK
#include <catch2/catch.hpp>

using namespace sketchps;
using namespace sketchps::worker;
using namespace sketchps::session;
using namespace sketchps::testing;
namespace fs = std::filesystem;

namespace {

// The naive reference: per round, each worker starts from w0, takes H steps of momentum SGD
// (v = m v + g; w -= lr v, v from zero every round, or with train.inner_state keep each rank's v
// carried from its previous round) on its batches (step r*H + h of the data order rule), the
// pseudo-gradients w0 - w are averaged, and the outer Nesterov step u = mo u + G; w0 -= lo (G + mo u)
// gives the next round's start.
std::vector<float> Reference(const JobSpec& job) {
  auto model = Model::Create(job.model, job.train.seed);
  REQUIRE(model.ok());
  auto train = LoadFashionMnist(job.data.path, Split::kTrain);
  REQUIRE(train.ok());
  FlatModel& flat = model->flat();
  const std::size_t d = flat.dim();
  const std::uint64_t H = job.train.local_steps, P = job.workers;
  const float lr = static_cast<float>(job.optimizer.lr.base_lr), m = static_cast<float>(job.optimizer.momentum);
  const float outer_lr = static_cast<float>(job.train.outer.lr), outer_m = static_cast<float>(job.train.outer.momentum);
  const auto permutation = EpochPermutation(job.data.train_samples, job.train.seed, 0);
  std::vector<float> w0(flat.params(), flat.params() + d), u(d, 0.0f);
  std::vector<std::vector<float>> velocity(P, std::vector<float>(d, 0.0f));  // each rank's
  for (std::uint64_t round = 0; round < job.total_rounds(); ++round) {
    std::vector<double> sum(d, 0.0);
    for (std::uint32_t rank = 0; rank < P; ++rank) {
      std::copy(w0.begin(), w0.end(), flat.params());
      std::vector<float>& v = velocity[rank];
      if (!job.train.keep_inner_state) std::fill(v.begin(), v.end(), 0.0f);
      for (std::uint64_t h = 0; h < H; ++h) {
        auto idx = StepIndices(permutation, round * H + h, rank, static_cast<std::uint32_t>(P), job.data.batch_size);
        REQUIRE(idx.ok());
        auto b = MakeBatch(*train, *idx);
        REQUIRE(b.ok());
        REQUIRE(model->ForwardBackward(b->input, b->target).ok());
        for (std::size_t j = 0; j < d; ++j) {
          v[j] = m * v[j] + flat.grads()[j];
          flat.params()[j] -= lr * v[j];
        }
      }
      for (std::size_t j = 0; j < d; ++j) sum[j] += w0[j] - flat.params()[j];
    }
    for (std::size_t j = 0; j < d; ++j) {
      const auto g = static_cast<float>(sum[j] / static_cast<double>(P));
      u[j] = outer_m * u[j] + g;
      w0[j] -= outer_lr * (g + outer_m * u[j]);
    }
  }
  return w0;
}

// Trains `job` (2 ranks, 3 rounds) and checks both ranks end equal and within 1e-5 of Reference(job),
// which it returns.
std::vector<float> CheckAgainstReference(const JobSpec& job, const std::string& mode) {
  const auto ranks = TrainAllRanks(job);
  CHECK(ranks[0].final_weights == ranks[1].final_weights);
  CHECK(ranks[0].rounds == 3);
  auto reference = Reference(job);
  const double diff = RelativeError(ranks[0].final_weights, reference);
  INFO(mode << ": relative difference " << diff);
  CHECK(diff < 1e-5);
  return reference;
}

}  // namespace

TEST_CASE("Local steps with a Nesterov outer step equal the naive reference in both modes", "[worker][grpc]") {
  for (const std::string mode : {"ps", "decentralized"}) {
    DYNAMIC_SECTION(mode) {
      const JobSpec job = MlpJob({"mode=" + mode, "workers=2", "scheme.name=dense", "train.rounds=3",
                                  "train.local_steps=3", "train.outer_optimizer.name=nesterov", "optimizer.lr=0.05",
                                  "optimizer.momentum=0.9", "job_id=local-" + mode});
      const auto reference = CheckAgainstReference(job, mode);
      // The reference tells H apart, and the outer optimizer too.
      auto fewer = job;
      fewer.train.local_steps = 2;
      CHECK(RelativeError(reference, Reference(fewer)) > 1e-3);
      auto averaged = job;
      averaged.train.outer = OuterOptimizerSpec{};
      CHECK(RelativeError(reference, Reference(averaged)) > 1e-3);
    }
  }
}

TEST_CASE("Local steps keeping the inner state equal the naive reference in both modes", "[worker][grpc]") {
  for (const std::string mode : {"ps", "decentralized"}) {
    DYNAMIC_SECTION(mode) {
      const JobSpec job =
          MlpJob({"mode=" + mode, "workers=2", "scheme.name=dense", "train.rounds=3", "train.local_steps=3",
                  "train.outer_optimizer.name=nesterov", "train.inner_state=keep", "optimizer.lr=0.05",
                  "optimizer.momentum=0.9", "job_id=keep-" + mode});
      REQUIRE(job.train.keep_inner_state);
      const auto reference = CheckAgainstReference(job, mode);
      // The reference tells keeping the velocity from resetting it.
      auto reset = job;
      reset.train.keep_inner_state = false;
      CHECK(RelativeError(reference, Reference(reset)) > 1e-3);
    }
  }
}

TEST_CASE("Local steps with average equal the naive reference with lr 1 and no momentum", "[worker][grpc]") {
  const JobSpec job = MlpJob({"workers=3", "scheme.name=dense", "train.rounds=2", "train.local_steps=4",
                              "optimizer.lr=0.05", "optimizer.momentum=0.5", "job_id=local-average"});
  const auto ranks = TrainAllRanks(job);
  const double diff = RelativeError(ranks[0].final_weights, Reference(job));
  INFO("relative difference " << diff);
  CHECK(diff < 1e-5);
}

TEST_CASE("train.local_steps 1 with outer_optimizer average is bitwise the job without them", "[worker][grpc]") {
  for (const std::string mode : {"ps", "decentralized"}) {
    DYNAMIC_SECTION(mode) {
      const std::vector<std::string> base{"mode=" + mode, "workers=2", "scheme.name=topk", "train.rounds=4",
                                          "job_id=h1-" + mode};
      auto explicit_keys = base;
      explicit_keys.insert(explicit_keys.end(), {"train.local_steps=1", "train.outer_optimizer.name=average"});
      const auto today = TrainAllRanks(MlpJob(base));
      const auto with_keys = TrainAllRanks(MlpJob(explicit_keys));
      for (std::size_t r = 0; r < today.size(); ++r) CHECK(with_keys[r].final_weights == today[r].final_weights);
      // Two local steps land elsewhere: the comparison can fail.
      auto two = base;
      two.push_back("train.local_steps=2");
      CHECK(TrainAllRanks(MlpJob(two))[0].final_weights != today[0].final_weights);
    }
  }
}

namespace {

constexpr std::uint64_t kRounds = 12;
constexpr std::uint64_t kKillAfter = 7;  // the killed worker completes rounds [0, 7)

// `inner_state`: train.inner_state, reset or keep.
JobSpec RestartJob(const std::string& inner_state) {
  auto job = ParseJobSpec(
      absl::StrCat("job_id: local-restart\nmodel: custom\nlayers: [[\"a\", [40, 10]], [\"b\", [300]]]\nworkers: 3\n"
                   "servers: 2\ntrain: {rounds: 12, eval_every_rounds: 0, local_steps: 3, outer_optimizer: {name: "
                   "nesterov}, inner_state: ",
                   inner_state,
                   "}\noptimizer: {name: sgd, lr: 0.05, momentum: 0.9}\ncheckpoint: {every_rounds: 5}\n"
                   "scheme: {name: topk, density: 0.02}\n"),
      "test.yaml");
  INFO(job.status().ToString());
  REQUIRE(job.ok());
  return *job;
}

// A synthetic gradient that depends only on the weights, the step and the rank.
std::vector<float> Gradient(const std::vector<float>& w, std::uint64_t step, std::uint32_t rank) {
  std::vector<float> g(w.size());
  for (std::size_t j = 0; j < w.size(); ++j) {
    g[j] = std::sin(0.37f * static_cast<float>(j) + 1.3f * static_cast<float>(step) + 2.1f * rank) + 0.5f * w[j];
  }
  return g;
}

// Runs rank `rank` with local steps from wherever the servers are until round `stop` (exclusive);
// Finishes at the job's end, else dies without a word. Returns its weights. `hand_local`: the
// LocalSteps goes to Join, so the state files carry its kept state (as the trainer does).
std::vector<float> RunWorker(const JobSpec& job, std::uint32_t rank, const std::vector<std::string>& servers,
                             const std::string& state_dir, std::uint64_t stop, bool hand_local) {
  const std::uint64_t H = job.train.local_steps;
  LocalSteps local(job.optimizer, job.layout, H, job.train.keep_inner_state);
  JoinedSession joined = JoinSession(job, rank, servers, state_dir, hand_local ? &local : nullptr);
  Session& session = *joined.session;
  std::vector<float>& w = joined.w;
  for (std::uint64_t r = joined.first; r < stop; ++r) {
    if (!local.Begin(w.data()).ok()) throw std::runtime_error("Begin");
    for (std::uint64_t h = 0; h < H; ++h) {
      const std::vector<float> g = Gradient(w, r * H + h, rank);
      const auto g_memory = AsDeviceMemory(g);
      if (!local.Step(g.data(), w.data(), r, h, session.plan().EpochOf(r, h)).ok()) throw std::runtime_error("Step");
    }
    auto delta = local.Finish(w.data());
    if (!delta.ok()) throw std::runtime_error(delta.status().ToString());
    auto record = session.Step(r, 0.0f, *delta, w.data());
    if (!record.ok()) throw std::runtime_error(record.status().ToString());
  }
  if (stop == kRounds) (void)session.Finish(stop);
  joined.session.reset();  // waits for the last state file
  return w;
}

std::vector<std::vector<float>> TrainRestarted(const JobSpec& job, bool kill, const std::string& state_root,
                                               bool hand_local = true) {
  return RunRanksOnCluster(job, state_root,
                           [&](std::uint32_t r, const std::vector<std::string>& servers, const std::string& dir) {
                             if (kill && r == 1) RunWorker(job, r, servers, dir, kKillAfter, hand_local);
                             return RunWorker(job, r, servers, dir, kRounds, hand_local);
                           });
}

}  // namespace

TEST_CASE("A worker restarted mid-job with local steps ends bitwise equal to the fault-free run", "[worker][grpc]") {
  for (const std::string inner_state : {"reset", "keep"}) {
    DYNAMIC_SECTION("train.inner_state " << inner_state) {
      const JobSpec job = RestartJob(inner_state);
      TempDir clean("sketchps-local"), restarted_dir("sketchps-local");
      const auto reference = TrainRestarted(job, false, clean.path.string());
      const auto restarted = TrainRestarted(job, true, restarted_dir.path.string());
      for (std::size_t r = 0; r < reference.size(); ++r) {
        INFO("rank " << r);
        CHECK(restarted[r] == reference[r]);
      }
      // Top-k's residual of the pseudo-gradients is not zero at the kill: without it the job ends elsewhere.
      const auto forgetful = TrainRestarted(job, true, "");
      CHECK(forgetful[0] != reference[0]);
      if (job.train.keep_inner_state) {
        // The scheme's state alone is not enough: a restart whose state files lack the inner
        // optimizer's velocity (LocalSteps not handed to Join) ends elsewhere too.
        TempDir without_local("sketchps-local");
        const auto no_velocity = TrainRestarted(job, true, without_local.path.string(), /*hand_local=*/false);
        CHECK(no_velocity[0] != reference[0]);
      }
    }
  }
}

TEST_CASE("LocalSteps: the pseudo-gradient is start minus the inner steps' weights, and the weights go back",
          "[worker]") {
  auto job = MlpJob({"optimizer.lr=0.5", "optimizer.momentum=0"});
  LayerTable layers;
  layers.layers.push_back(Layer{"x", 0, 3, {3}});
  LocalSteps local(job.optimizer, layers, 2, false);
  std::vector<float> w{1.0f, 2.0f, 3.0f};
  const std::vector<float> g{1.0f, -2.0f, 0.5f};
  const auto w_memory = AsDeviceMemory(w), g_memory = AsDeviceMemory(g);
  CHECK_FALSE(local.Finish(w.data()).ok());  // without Begin
  REQUIRE(local.Begin(w.data()).ok());
  REQUIRE(local.Step(g.data(), w.data(), 0, 0, 0.0).ok());
  REQUIRE(local.Step(g.data(), w.data(), 0, 1, 0.0).ok());
  CHECK(w == std::vector<float>{0.0f, 4.0f, 2.5f});
  auto delta = local.Finish(w.data());
  REQUIRE(delta.ok());
  CHECK(std::vector<float>(*delta, *delta + 3) == std::vector<float>{1.0f, -2.0f, 0.5f});
  CHECK(w == std::vector<float>{1.0f, 2.0f, 3.0f});
}

TEST_CASE("Every scheme with local steps keeps replicas equal to the master copy", "[worker][grpc]") {
  // The trainer checks every replica against the shards' checksum after every round. The schemes
  // with momentum of their own take the averaging outer step, the others DiLoCo's Nesterov step.
  for (const auto& name : SchemeNames()) {
    DYNAMIC_SECTION(name) {
      const JobSpec probe = MlpJob({"scheme.name=" + name});
      const std::string outer = probe.scheme.global_momentum ? "nesterov" : "average";
      const JobSpec job = MlpJob({"workers=2", "scheme.name=" + name, "train.rounds=3", "train.local_steps=2",
                                  "train.outer_optimizer.name=" + outer, "job_id=local-" + name});
      const auto ranks = TrainAllRanks(job);
      CHECK(ranks[0].final_weights == ranks[1].final_weights);
      CHECK(ranks[0].rounds == 3);
    }
  }
}
