// No decision depends on an error's words: with SKETCHPS_TEST_REWORD_ERRORS=1 every process of a job
// rewords each status message it sends over gRPC (common/net/grpc_edge.h), keeping code and Reason, and
// the job behaves exactly as it does with the original words:
//   - a shard killed mid-run and restarted: the workers join again (Reason::kRejoin) and replay the
//     round (kReplayRound); the final weights equal an uninterrupted run's, bitwise;
//   - a worker whose job differs from the servers': the server refuses its Join
//     (kFingerprintMismatch) and the worker exits 2, the configuration-error code.
// tests/structure/test_no_message_decisions.py scans the code for decisions on message text.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/net/port_file.h"
#include "launch/child.h"
#include "tools/run.h"

using namespace sketchps;
using namespace sketchps::tools;
namespace fs = std::filesystem;

namespace {

// Sets SKETCHPS_TEST_REWORD_ERRORS=1 for this process and the ones it starts, for one scope.
class Reworded {
 public:
  Reworded() { REQUIRE(setenv("SKETCHPS_TEST_REWORD_ERRORS", "1", 1) == 0); }
  ~Reworded() { unsetenv("SKETCHPS_TEST_REWORD_ERRORS"); }
};

fs::path Dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("sketchps-reworded-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

RunOptions Options(const fs::path& dir, std::vector<std::string> overrides) {
  RunOptions o;
  o.out = dir.string();
  o.progress = false;
  o.job.log_level = "info";
  o.job.overrides = std::move(overrides);
  o.plots = false;
  return o;
}

nlohmann::json ReadSummary(const fs::path& dir) {
  std::ifstream in(dir / "summary.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

std::string ReadText(const fs::path& file) {
  std::ifstream in(file);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

fs::path Binary(const std::string& folder, const std::string& name) {
  return fs::path(launch::SelfExecutable()).parent_path().parent_path() / folder / name;
}

// Waits up to `seconds` for `child` to exit; its exit status, or -1 if it still runs.
int WaitExit(launch::Child& child, double seconds) {
  for (int i = 0; i < static_cast<int>(seconds * 20); ++i) {
    if (auto rc = child.Poll()) return *rc;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

}  // namespace

TEST_CASE("With every message reworded a killed shard still rejoins and replays to the same weights",
          "[reworded][processes]") {
  const std::vector<std::string> job{"model=mlp",       "workers=2",
                                     "servers=2",       "scheme.name=gs_sgd",
                                     "train.rounds=30", "train.eval_every_rounds=0",
                                     "job_id=reworded", "checkpoint.every_rounds=1000"};
  const fs::path clean = Dir("clean"), killed = Dir("killed");
  REQUIRE(RunJob(Options(clean, job)) == 0);
  Reworded reworded;
  RunOptions faulty = Options(killed, job);
  faulty.kills = {"server:1@10"};
  REQUIRE(RunJob(faulty) == 0);
  CHECK(ReadSummary(clean)["final_weights_checksum"] == ReadSummary(killed)["final_weights_checksum"]);
  CHECK(ReadSummary(killed)["faults"]["kills"][0]["process"] == "server 1");
  // The restarted shard assembled from the workers' replicas: they were told to join again.
  CHECK_THAT(ReadText(killed / "server-1.log"), Catch::Contains("'s replica at round"));
  fs::remove_all(clean.parent_path());
}

TEST_CASE("With every message reworded a worker whose job differs still exits 2", "[reworded][processes]") {
  const fs::path dir = Dir("mismatch");
  Reworded reworded;
  const std::vector<std::string> common{"--set",     "model=mlp", "--set",          "workers=1", "--set",
                                        "servers=1", "--set",     "train.rounds=3", "--insecure"};
  std::vector<std::string> server{Binary("server", "sketchps-server").string(),
                                  "--shard",
                                  "0",
                                  "--listen",
                                  "127.0.0.1:0",
                                  "--port-file",
                                  (dir / "port").string()};
  server.insert(server.end(), common.begin(), common.end());
  auto s = launch::Child::Start("server", server, (dir / "server.log").string());
  REQUIRE(s.ok());
  for (int i = 0; i < 200 && !fs::exists(dir / "port"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(fs::exists(dir / "port"));
  const auto ports = ReadPortFile((dir / "port").string());
  REQUIRE(ports.ok());
  const std::string port = std::to_string(ports->grpc);
  std::vector<std::string> worker{Binary("worker", "sketchps-worker").string(),
                                  "--rank",
                                  "0",
                                  "--servers",
                                  "127.0.0.1:" + port,
                                  "--set",
                                  "optimizer.lr=0.2",
                                  "--patience-seconds",
                                  "20"};
  worker.insert(worker.end(), common.begin(), common.end());
  auto w = launch::Child::Start("worker", worker, (dir / "worker.log").string());
  REQUIRE(w.ok());
  const int rc = WaitExit(*w, 60);
  const std::string log = ReadText(dir / "worker.log");
  INFO(log);
  CHECK(rc == 2);
  CHECK_THAT(log, Catch::Contains("[reworded]"));  // the refusal came reworded
  s->Stop(absl::Seconds(5));
  fs::remove_all(dir.parent_path());
}
