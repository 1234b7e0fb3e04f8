// A round deadline's carried gradient survives a worker restart (ps.round_deadline_seconds): a
// worker left out of a round keeps that round's gradient for its next round (Scheme::FinishExcluded,
// schemes/scheme_base.h), and its state file (session/scheme_state_file.h) must keep it too. The
// reference is the worker that was not restarted: after the restore, the next round's payload and the
// state after it must be the same bits. Without the carry in the file the restored worker sends its
// new gradient alone.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "engine/replica.h"
#include "job/job_spec.h"
#include "kernels/backend.h"
#include "session/scheme_state_file.h"

using namespace sketchps;
using namespace sketchps::session;
namespace fs = std::filesystem;

namespace {

JobSpec Job(const std::string& scheme) {
  auto job = ParseJobSpec(absl::StrCat("job_id: carry\nmodel: custom\nlayers: [[\"a\", [60]]]\nworkers: 2\n"
                                       "servers: 1\ntrain: {rounds: 10}\nps: {round_deadline_seconds: 0.5}\n"
                                       "scheme: {name: ",
                                       scheme, ", density: 0.1}\n"),
                          "t.yaml");
  REQUIRE(job.ok());
  return *job;
}

std::unique_ptr<Replica> MakeReplica(const JobSpec& job) {
  auto map = MakeShardMap(job.layout, job.servers);
  REQUIRE(map.ok());
  auto replica = Replica::Create(ReplicaOptions{0, job.workers, *map, job.layout, job.scheme.make, job.scheme.density,
                                                job.scheme.global_momentum, job.optimizer, job.train.seed,
                                                /*parallel_shards=*/false, /*may_be_left_out=*/true});
  REQUIRE(replica.ok());
  return *std::move(replica);
}

std::vector<float> Gradient(std::size_t n, float phase) {
  std::vector<float> g(n);
  for (std::size_t i = 0; i < n; ++i) g[i] = std::sin(0.7f * static_cast<float>(i) + phase);
  return g;
}

// One round of shard 0's scheme in which this worker takes part; returns its payload.
PayloadValue FullRound(Scheme& scheme, std::uint64_t round, const float* d_grad) {
  REQUIRE(scheme.BeginRound({round, 0.0}, d_grad).ok());
  auto c = scheme.Contribute(0, nullptr);
  REQUIRE(c.ok());
  REQUIRE(c->payload.has_value());
  REQUIRE(scheme.Finish(PhaseResult{*c->payload, 1}).ok());
  return *c->payload;
}

}  // namespace

TEST_CASE("A round deadline's carried gradient is in the worker's state file and survives a restart",
          "[worker][round_deadline]") {
  const std::string scheme = GENERATE(std::string("topk"), std::string("dense"));
  const JobSpec job = Job(scheme);
  const std::size_t dim = job.layout.dim();
  const fs::path dir = fs::temp_directory_path() / absl::StrCat("sketchps-carry-", ::getpid(), "-", scheme);
  fs::remove_all(dir);
  kernels::DeviceArray<float> d_g0(Gradient(dim, 0.0f)), d_g1(Gradient(dim, 1.0f)), d_g2(Gradient(dim, 2.0f));
  std::vector<float> weights(dim, 0.25f);

  auto running = MakeReplica(job);
  FullRound(running->scheme(0), 0, d_g0.data());  // a residual to keep as well (top-k)
  // Round 1 closes without this worker: G_t from the others, its own gradient carried.
  Scheme& late = running->scheme(0);
  REQUIRE(late.BeginRound({1, 0.0}, d_g1.data()).ok());
  REQUIRE(late.Contribute(0, nullptr).ok());
  const PhaseResult others{DenseValues{std::vector<float>(dim, 0.125f)}, 1, false, {0}};
  REQUIRE(late.FinishExcluded(others).ok());
  REQUIRE(late.CarriedGradient().size() == dim);

  // Saved after round 1 (2 rounds applied), restored into a fresh worker.
  SchemeStateFiles files(dir.string(), job.job_id, 0, dim, job.checkpoint.every_rounds);
  files.SaveAsync(2, *running, weights.data());
  REQUIRE(files.WaitSaved().ok());
  auto restarted = MakeReplica(job);
  auto restored = files.Restore(2, *restarted, weights.data());
  REQUIRE(restored.ok());
  CHECK(restored->restored);
  CHECK(restarted->scheme(0).CarriedGradient() == late.CarriedGradient());

  // Round 2: both send g2 plus the carried g1 (and the same residual), bit for bit.
  const PayloadValue expected = FullRound(running->scheme(0), 2, d_g2.data());
  const PayloadValue actual = FullRound(restarted->scheme(0), 2, d_g2.data());
  CHECK(actual == expected);
  CHECK(restarted->scheme(0).SaveState().arrays == running->scheme(0).SaveState().arrays);
  CHECK(restarted->scheme(0).CarriedGradient().empty());  // the carry went into round 2
  fs::remove_all(dir);
}
