// A worker killed between rounds and restarted goes on exactly where it stopped when it keeps its
// scheme state (SessionOptions::state_dir, session/scheme_state_file.h): the job ends bitwise equal to
// the run without the fault. Without the state directory the restarted worker starts with an empty
// residual and the job ends elsewhere, which shows the comparison can fail. Real gRPC on loopback
// (tests/support/cluster.h), sessions as the Python package drives them, synthetic gradients that
// depend only on the weights, the round and the rank (so a restarted worker recomputes the same ones).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/wire/file_key.h"
#include "common/wire/framed_file.h"
#include "job/job_spec.h"
#include "session/scheme_state_file.h"
#include "session/session.h"
#include "support/session_runs.h"

using namespace sketchps;
using namespace sketchps::session;
using namespace sketchps::testing;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kRounds = 24;
constexpr std::uint64_t kKillAfter = 11;  // the killed worker completes rounds [0, 11); 10 is a checkpoint round

JobSpec Job(const std::string& scheme) {
  const std::string yaml = absl::StrCat(
      "job_id: restart-state\nmodel: custom\nlayers: [[\"a\", [40, 10]], [\"b\", [300]]]\nworkers: 3\nservers: 2\n"
      "train: {rounds: ",
      kRounds,
      ", eval_every_rounds: 0}\noptimizer: {name: sgd, lr: 0.05, momentum: 0.9}\n"
      "checkpoint: {every_rounds: 5}\nscheme: {name: ",
      scheme, ", density: 0.02}\n");
  auto job = ParseJobSpec(yaml, "test.yaml");
  INFO(job.status().ToString());
  REQUIRE(job.ok());
  return *job;
}

std::vector<float> Gradient(const std::vector<float>& w, std::uint64_t round, std::uint32_t rank) {
  std::vector<float> g(w.size());
  for (std::size_t j = 0; j < w.size(); ++j) {
    g[j] = std::sin(0.37f * static_cast<float>(j) + 1.3f * static_cast<float>(round) + 2.1f * rank) *
               (1.0f + 0.002f * static_cast<float>(j % 97)) +
           0.5f * w[j];
  }
  return g;
}

// How rank 1 dies after kKillAfter rounds: not at all; between two rounds; after the servers applied
// its last round and before that round's state file was written (the file is lost); or in the
// middle of the next round, after shard 1 applied it and before shard 0 did.
enum class Kill { kNone, kBetweenRounds, kBeforeItsFile, kBetweenShards };

// Runs rank `rank` from wherever the servers are until round `stop` (exclusive), then dies as `kill`
// says, or Finishes when that is the end of the job. Returns the weights it ends with.
std::vector<float> RunWorker(const JobSpec& job, std::uint32_t rank, const std::vector<std::string>& servers,
                             const std::string& state_dir, std::uint64_t stop, Kill kill = Kill::kNone) {
  JoinedSession joined = JoinSession(job, rank, servers, state_dir);
  Session& session = *joined.session;
  std::vector<float>& w = joined.w;
  for (std::uint64_t r = joined.first; r < stop; ++r) {
    const std::vector<float> g = Gradient(w, r, rank);
    const auto g_memory = AsDeviceMemory(g);
    auto record = session.Step(r, 0.0f, g.data(), w.data());
    if (!record.ok()) throw std::runtime_error(record.status().ToString());
  }
  if (stop == kRounds) (void)session.Finish(stop);
  if (kill == Kill::kBetweenShards) {
    const std::vector<float> g = Gradient(w, stop, rank);
    const auto g_memory = AsDeviceMemory(g);
    (void)session.RunShard(1, stop, g.data(), w.data());
  }
  joined.session.reset();  // waits for the last state file
  // The file of round stop - 1 is there: a checkpoint round (every 5), kept when the next came.
  if (kill == Kill::kBeforeItsFile) {
    fs::remove(fs::path(state_dir) / SchemeStateFiles(state_dir, job.job_id, rank, 0, 0).FileName(stop));
  }
  return w;  // a killed worker's session ended without a word to the servers
}

// Every rank's final weights; rank 1 stops after kKillAfter rounds and starts again unless kNone.
std::vector<std::vector<float>> Train(const JobSpec& job, Kill kill, const std::string& state_root) {
  return RunRanksOnCluster(job, state_root,
                           [&](std::uint32_t r, const std::vector<std::string>& servers, const std::string& dir) {
                             if (kill != Kill::kNone && r == 1) RunWorker(job, r, servers, dir, kKillAfter, kill);
                             return RunWorker(job, r, servers, dir, kRounds);
                           });
}

}  // namespace

TEST_CASE("A worker restarted with its state directory ends bitwise equal to the fault-free run", "[worker][grpc]") {
  for (const std::string scheme : {"topk", "dgc", "gs_sgd", "scalecom"}) {
    DYNAMIC_SECTION(scheme) {
      const JobSpec job = Job(scheme);
      TempDir clean("sketchps-state"), between("sketchps-state"), before_file("sketchps-state"),
          between_shards("sketchps-state");
      const auto reference = Train(job, Kill::kNone, clean.path.string());
      const auto restarted = Train(job, Kill::kBetweenRounds, between.path.string());
      // Killed after the servers applied round 10, before its file: the worker replays round 10.
      const auto replayed = Train(job, Kill::kBeforeItsFile, before_file.path.string());
      // Killed in round 11 after shard 1 applied it: the worker replays round 11 (shard 1 answers
      // its pushes as retries).
      const auto split = Train(job, Kill::kBetweenShards, between_shards.path.string());
      for (std::size_t r = 0; r < reference.size(); ++r) {
        INFO("rank " << r);
        CHECK(restarted[r] == reference[r]);
        CHECK(replayed[r] == reference[r]);
        CHECK(split[r] == reference[r]);
      }
      // The residual is not zero at the kill: without the state the same kill ends elsewhere.
      const auto forgetful = Train(job, Kill::kBetweenRounds, "");
      CHECK(forgetful[0] != reference[0]);
    }
  }
}

TEST_CASE("Scheme state files: kept at checkpoint rounds, refused when they belong to another worker", "[worker]") {
  const JobSpec job = Job("topk");
  TempDir dir("sketchps-state");
  LocalCluster cluster(job);
  std::vector<std::future<std::vector<float>>> ranks;
  for (std::uint32_t r = 0; r < job.workers; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      return RunWorker(job, r, cluster.addresses(), (dir.path / "shared").string(), kRounds);
    }));
  }
  for (auto& f : ranks) f.get();
  // Every round's file replaced the previous one, except at the shards' checkpoint rounds (every 5):
  // the newest three of those stay, with the last round's.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path / "shared")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"worker-0-state-000000000010.bin", "worker-0-state-000000000015.bin",
                                          "worker-0-state-000000000020.bin", "worker-0-state-000000000024.bin",
                                          "worker-1-state-000000000010.bin", "worker-1-state-000000000015.bin",
                                          "worker-1-state-000000000020.bin", "worker-1-state-000000000024.bin",
                                          "worker-2-state-000000000010.bin", "worker-2-state-000000000015.bin",
                                          "worker-2-state-000000000020.bin", "worker-2-state-000000000024.bin"});

  auto replica = Replica::Create(ReplicaOptions{0, job.workers, *MakeShardMap(job.layout, job.servers), job.layout,
                                                job.scheme.make, job.scheme.density, job.scheme.global_momentum,
                                                job.optimizer, job.train.seed});
  REQUIRE(replica.ok());
  std::vector<float> w(job.layout.dim());
  const auto w_memory = AsDeviceMemory(w);
  const auto shared = (dir.path / "shared").string();
  SchemeStateFiles mine(shared, job.job_id, 0, job.layout.dim(), 5);
  auto restored = mine.Restore(20, **replica, w.data());
  REQUIRE(restored.ok());
  CHECK(restored->restored);
  CHECK(restored->first_round == 20);
  CHECK(w == std::vector<float>(job.layout.dim()));     // the file of the servers' round leaves the weights
  auto replay = mine.Restore(21, **replica, w.data());  // one round behind: weights from the file
  REQUIRE(replay.ok());
  CHECK(replay->first_round == 20);
  CHECK(w != std::vector<float>(job.layout.dim()));
  CHECK_FALSE(mine.Restore(22, **replica, w.data())->restored);  // no file of round 22 or 21: nothing

  SchemeStateFiles other_job(shared, "another-job", 0, job.layout.dim(), 5);
  CHECK(other_job.Restore(20, **replica, w.data()).status().message() ==
        absl::StrCat(shared,
                     "/worker-0-state-000000000020.bin: job_id is restart-state, this worker's is another-job "
                     "(a file of another job?)"));
  SchemeStateFiles longer(shared, job.job_id, 0, job.layout.dim() + 1, 5);
  CHECK(absl::StrContains(longer.Restore(20, **replica, w.data()).status().message(),
                          ": dim is 700, this worker's is 701"));

  // A truncated file and a flipped byte are refused, naming the file.
  const fs::path file = fs::path(shared) / "worker-0-state-000000000015.bin";
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 3);
  CHECK(mine.Restore(15, **replica, w.data()).status().message() ==
        absl::StrCat(file.string(), ": truncated or padded (header says ", bytes.size() - 20,
                     " payload bytes, file has ", bytes.size() - 23, ")"));
  bytes[bytes.size() / 2] ^= 0x40;
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  CHECK(mine.Restore(15, **replica, w.data()).status().message() == absl::StrCat(file.string(), ": CRC mismatch"));

  // A restart from round 15 removes the later files of its rank: they belong to a trajectory that
  // will be computed again.
  mine.DiscardAfter(15);
  CHECK_FALSE(fs::exists(fs::path(shared) / "worker-0-state-000000000020.bin"));
  CHECK(fs::exists(fs::path(shared) / "worker-1-state-000000000020.bin"));
}

TEST_CASE("Scheme state files written with a checkpoint key restore only with that key", "[worker]") {
  const JobSpec job = Job("topk");
  TempDir dir("sketchps-state");
  const auto replica = [&] {
    auto r = Replica::Create(ReplicaOptions{0, job.workers, *MakeShardMap(job.layout, job.servers), job.layout,
                                            job.scheme.make, job.scheme.density, job.scheme.global_momentum,
                                            job.optimizer, job.train.seed});
    REQUIRE(r.ok());
    return *std::move(r);
  };
  const auto key = std::make_shared<const FileKey>(*FileKey::FromBytes(std::string(40, 'k'), "test.key"));
  const std::string shared = (dir.path / "state").string();
  std::vector<float> w(job.layout.dim());
  for (std::size_t j = 0; j < w.size(); ++j) w[j] = 0.25f * static_cast<float>(j % 13);
  auto saver = replica();
  SchemeStateFiles keyed(shared, job.job_id, 0, job.layout.dim(), 5, key);
  keyed.SaveAsync(7, *saver, w.data());
  REQUIRE(keyed.WaitSaved().ok());
  const fs::path file = fs::path(shared) / "worker-0-state-000000000007.bin";
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  CHECK(bytes.substr(0, 8) == "SKPKWST1");

  auto restorer = replica();
  std::vector<float> got(job.layout.dim());
  auto restored = keyed.Restore(8, *restorer, got.data());  // one round behind: the weights come from the file
  REQUIRE(restored.ok());
  CHECK(restored->restored);
  CHECK(got == w);

  SchemeStateFiles keyless(shared, job.job_id, 0, job.layout.dim(), 5);
  auto refused = keyless.Restore(7, *restorer, got.data());
  REQUIRE(!refused.ok());
  CHECK(IsKeyError(refused.status()));
  CHECK(absl::StrContains(refused.status().message(), file.string() + ": written with a checkpoint key"));
  CHECK(absl::StrContains(refused.status().message(), "--checkpoint-key-file"));

  SchemeStateFiles other(shared, job.job_id, 0, job.layout.dim(), 5,
                         std::make_shared<const FileKey>(*FileKey::FromBytes(std::string(32, 'o'), "other.key")));
  CHECK(other.Restore(7, *restorer, got.data()).status().message() ==
        absl::StrCat(file.string(),
                     ": integrity tag does not match the checkpoint key (tampered, or written with another key)"));

  // An untagged file under a key is refused too.
  keyless.SaveAsync(9, *saver, w.data());
  REQUIRE(keyless.WaitSaved().ok());
  auto untagged = keyed.Restore(9, *restorer, got.data());
  REQUIRE(!untagged.ok());
  CHECK(absl::StrContains(untagged.status().message(), "worker-0-state-000000000009.bin: has no integrity tag"));
}

namespace {

// A worker's local state as LocalSteps keeps it with train.inner_state keep (worker/local_steps.h).
struct FakeLocal final : WorkerLocalState {
  explicit FakeLocal(std::vector<float> v) : values(std::move(v)) {}
  std::vector<float> SaveLocal() const override { return values; }
  std::uint64_t local_size() const override { return values.size(); }
  absl::Status RestoreLocal(const std::vector<float>& state) override {
    values = state;
    return absl::OkStatus();
  }
  std::vector<float> values;
};

}  // namespace

TEST_CASE("Scheme state files carry the worker's local state and refuse a file whose local_state size differs",
          "[worker]") {
  const JobSpec job = Job("topk");
  TempDir dir("sketchps-state");
  auto replica = Replica::Create(ReplicaOptions{0, job.workers, *MakeShardMap(job.layout, job.servers), job.layout,
                                                job.scheme.make, job.scheme.density, job.scheme.global_momentum,
                                                job.optimizer, job.train.seed});
  REQUIRE(replica.ok());
  const std::string shared = (dir.path / "state").string();
  std::vector<float> w(job.layout.dim());
  for (std::size_t j = 0; j < w.size(); ++j) w[j] = 0.25f * static_cast<float>(j % 13);
  FakeLocal saved({1.5f, -2.0f, 3.25f, 0.0f, 7.0f});
  SchemeStateFiles writer(shared, job.job_id, 0, job.layout.dim(), 5);
  writer.SetLocal(&saved);
  writer.SaveAsync(7, **replica, w.data());
  REQUIRE(writer.WaitSaved().ok());

  // Restored with the schemes: from the file of the servers' round, and from the one behind it.
  FakeLocal got(std::vector<float>(5, 0.0f));
  SchemeStateFiles reader(shared, job.job_id, 0, job.layout.dim(), 5);
  reader.SetLocal(&got);
  std::vector<float> params(job.layout.dim());
  auto restored = reader.Restore(7, **replica, params.data());
  REQUIRE(restored.ok());
  CHECK(restored->restored);
  CHECK(got.values == saved.values);
  got.values.assign(5, 0.0f);
  auto replay = reader.Restore(8, **replica, params.data());
  REQUIRE(replay.ok());
  CHECK(replay->first_round == 7);
  CHECK(got.values == saved.values);
  CHECK(params == w);

  // Another size (another optimizer, or none kept) is refused naming the field, nothing changed.
  const std::string file = (fs::path(shared) / "worker-0-state-000000000007.bin").string();
  FakeLocal longer(std::vector<float>(6, 9.0f));
  SchemeStateFiles wider(shared, job.job_id, 0, job.layout.dim(), 5);
  wider.SetLocal(&longer);
  std::vector<float> untouched(job.layout.dim(), -1.0f);
  CHECK(wider.Restore(8, **replica, untouched.data()).status().message() ==
        absl::StrCat(file, ": the size of local_state is 5, this worker's is 6 (a file of another job?)"));
  CHECK(longer.values == std::vector<float>(6, 9.0f));
  CHECK(untouched == std::vector<float>(job.layout.dim(), -1.0f));
  SchemeStateFiles none(shared, job.job_id, 0, job.layout.dim(), 5);
  CHECK(absl::StrContains(none.Restore(7, **replica, params.data()).status().message(),
                          ": the size of local_state is 5, this worker's is 0"));
  // A file without local state, read by a worker that keeps one.
  none.SaveAsync(9, **replica, w.data());
  REQUIRE(none.WaitSaved().ok());
  CHECK(absl::StrContains(reader.Restore(9, **replica, params.data()).status().message(),
                          "worker-0-state-000000000009.bin: the size of local_state is 0, this worker's is 5"));
}
