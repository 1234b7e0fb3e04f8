// The round deadline end to end (ps.round_deadline_seconds; docs/protocol.md "Round deadline"): real
// sketchps-server and sketchps-worker processes on loopback, one worker paused with SIGSTOP (a
// preempted machine, a long GC pause). The others go on without it; when it resumes it is told it
// was left out, applies the rounds it missed and finishes with the same weights as everyone (every
// round's replica check passes, or the run would fail). Without the deadline the same pause holds up
// every worker for its whole length.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tools/run.h"

using namespace sketchps;
using namespace sketchps::tools;
namespace fs = std::filesystem;

namespace {

fs::path RunDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("sketchps-straggler-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  return dir;
}

// The pid of the sketchps-worker of `rank` whose command line names `dir` (0 when none yet).
pid_t WorkerPid(const fs::path& dir, int rank) {
  const std::string needle = "--rank " + std::to_string(rank) + " ";
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find("sketchps-worker") != std::string::npos && cmd.find(dir.string()) != std::string::npos &&
        cmd.find(needle) != std::string::npos) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return 0;
}

std::vector<nlohmann::json> JsonLines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// Runs the job with worker 1 paused for `pause` once it has recorded 5 rounds; returns the exit code.
int RunWithPause(const fs::path& dir, const std::vector<std::string>& job, std::chrono::milliseconds pause) {
  RunOptions o;
  o.out = dir.string();
  o.progress = false;
  o.plots = false;
  o.job.log_level = "info";
  o.job.overrides = job;
  auto run = std::async(std::launch::async, [&o] { return RunJob(o); });
  pid_t pid = 0;
  for (int i = 0; i < 600 && pid == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (fs::exists(dir / "worker-1.jsonl") && JsonLines(dir / "worker-1.jsonl").size() >= 5) pid = WorkerPid(dir, 1);
  }
  REQUIRE(pid != 0);
  REQUIRE(::kill(pid, SIGSTOP) == 0);
  std::this_thread::sleep_for(pause);
  ::kill(pid, SIGCONT);
  return run.get();
}

}  // namespace

TEST_CASE("With a round deadline a paused worker is left out, catches up and ends with everyone's weights",
          "[run][processes][straggler]") {
  const std::vector<std::string> job{"model=mlp",
                                     "workers=3",
                                     "servers=2",
                                     "scheme.name=topk",
                                     "train.rounds=60",
                                     "train.eval_every_rounds=0",
                                     "job_id=straggler-test",
                                     "ps.round_deadline_seconds=0.05"};
  const fs::path dir = RunDir("deadline");
  REQUIRE(RunWithPause(dir, job, std::chrono::milliseconds(1500)) == 0);
  std::ifstream in(dir / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  CHECK(summary["rounds"] == 60);
  CHECK(summary["rounds_left_out"][1].get<int>() + summary["rounds_caught_up"][1].get<int>() >= 1);
  // The paused worker was left out of rounds and fetched others it had not computed; it recorded
  // every round of the job either way.
  const auto late = JsonLines(dir / "worker-1.jsonl");
  REQUIRE(late.size() == 60);
  int left_out = 0, caught_up = 0;
  for (const auto& r : late) {
    left_out += r.value("left_out", 0) > 0 ? 1 : 0;
    caught_up += r.value("caught_up", false) ? 1 : 0;
  }
  CHECK(left_out + caught_up >= 1);
  // Every worker ends at the same weights (each round's replica check compared them with the shards).
  const auto first = JsonLines(dir / "worker-0.jsonl").back()["checksum"];
  CHECK(late.back()["checksum"] == first);
  CHECK(JsonLines(dir / "worker-2.jsonl").back()["checksum"] == first);
  // The shards logged whom they closed rounds without.
  std::ifstream log(dir / "server-0.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("closed at its deadline (0.05 s) without worker 1"));
  fs::remove_all(dir.parent_path());
}
