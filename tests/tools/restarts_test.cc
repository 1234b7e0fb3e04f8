// What `sketchps run` restarts (tools/faults.h, tools/local_cluster.h), against an uninterrupted run
// of the same job:
//   - `--kill worker:1@N` in ps mode: the worker is killed and started again; it restores its state
//     (top-k's residual) from its state file and the job ends bitwise equal to the fault-free run
//     (it used to stay dead, and the job stalled until the others' patience ran out, blaming shard 0);
//   - `--kill worker:...` is refused up front in an elastic job, where a restarted slot could not join;
//   - a shard that exits because its accept loop stalled (exit 5, after its drain and checkpoint, as
//     sketchps-server does after file-descriptor exhaustion) is started again like a killed one.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "job/job_spec.h"
#include "launch/daemon_args.h"
#include "support/run_folder.h"
#include "tools/faults.h"

using namespace sketchps;
using namespace sketchps::testing;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> Job(const std::string& id) {
  return {"model=mlp",
          "workers=2",
          "servers=2",
          "scheme.name=topk",
          "train.rounds=40",
          "train.eval_every_rounds=0",
          "checkpoint.every_rounds=10",
          "job_id=" + id};
}

// A sketchps-server stand-in for shard 1: the first time, the real server runs until worker 0 has
// recorded 12 rounds, is stopped with SIGTERM (it drains and checkpoints, as before an accept-stall
// exit) and the stand-in exits 5; every later start is the real server.
void WriteStallingServer(const fs::path& bin, const fs::path& out) {
  fs::create_directories(bin);
  fs::create_symlink(BuildBinary("worker", "sketchps-worker"), bin / "sketchps-worker");
  const std::string real = BuildBinary("server", "sketchps-server").string();
  std::ofstream(bin / "sketchps-server")
      << "#!/bin/sh\nreal='" << real << "'\nmarker='" << (bin / "stalled-once").string() << "'\n"
      << "case \" $* \" in *\" --shard 1 \"*) ;; *) exec \"$real\" \"$@\" ;; esac\n"
      << "[ -e \"$marker\" ] && exec \"$real\" \"$@\"\n: >\"$marker\"\n"
      << "\"$real\" \"$@\" & pid=$!\ni=0\n"
      << "while [ \"$(cat '" << (out / "worker-0.jsonl").string()
      << "' 2>/dev/null | wc -l)\" -lt 12 ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n"
      << "kill -TERM $pid; wait $pid\necho 'accept loop stalled (stand-in)' >&2\nexit "
      << launch::kServerExitAcceptStalled << "\n";
  fs::permissions(bin / "sketchps-server", fs::perms::owner_all);
}

}  // namespace

TEST_CASE("A worker killed in ps mode is restarted with its state and the job ends bitwise as without the kill",
          "[run][processes]") {
  const fs::path clean = FreshRunDir("restarts", "worker-clean"), killed = FreshRunDir("restarts", "worker-killed");
  REQUIRE(tools::RunJob(QuietRun(clean, Job("kill-worker"))) == 0);
  tools::RunOptions faulty = QuietRun(killed, Job("kill-worker"));
  faulty.kills = {"worker:1@12"};
  faulty.job.log_level = "info";  // the restarted worker logs the state it restored at info
  REQUIRE(tools::RunJob(faulty) == 0);
  const nlohmann::json a = ReadSummaryFile(clean), b = ReadSummaryFile(killed);
  CHECK(b["faults"]["kills"][0]["process"] == "worker 1");
  CHECK(b["rounds"] == 40);
  CHECK(a["final_weights_checksum"] == b["final_weights_checksum"]);
  const std::string log = ReadText(killed / "worker-1.log");
  CHECK_THAT(log, Catch::Contains("restored the s"));  // "the scheme state of round" or "the state of round"
  CHECK_THAT(log, !Catch::Contains("empty scheme state"));
  fs::remove_all(clean.parent_path());
}

TEST_CASE("--kill worker is refused up front in an elastic job", "[run]") {
  auto job = ParseJobSpec(DefaultJobSpecYaml(), "t", {"workers=6", "ps.elastic=true", "ps.initial_workers=4"});
  REQUIRE(job.ok());
  auto planned = tools::Faults::Plan({"worker:1@10"}, *job);
  REQUIRE(!planned.ok());
  CHECK_THAT(std::string(planned.status().message()),
             Catch::Contains("--kill worker:1@10") && Catch::Contains("elastic"));
  CHECK(tools::Faults::Plan({"server:1@10"}, *job).ok());
}

TEST_CASE("A shard whose accept loop stalled is restarted and the job ends as without it", "[run][processes]") {
  const fs::path clean = FreshRunDir("restarts", "stall-clean"), stalled = FreshRunDir("restarts", "stall");
  REQUIRE(tools::RunJob(QuietRun(clean, Job("stall"))) == 0);
  const fs::path bin = stalled.parent_path() / "stalling-bin";
  WriteStallingServer(bin, stalled);
  tools::RunOptions o = QuietRun(stalled, Job("stall"));
  o.bin_dir = bin.string();
  REQUIRE(tools::RunJob(o) == 0);
  CHECK(fs::exists(bin / "stalled-once"));
  const nlohmann::json a = ReadSummaryFile(clean), b = ReadSummaryFile(stalled);
  CHECK(b["faults"]["restarts"][0]["process"] == "server 1");
  CHECK(b["faults"]["restarts"][0]["why"] == "accept loop stalled");
  CHECK(a["final_weights_checksum"] == b["final_weights_checksum"]);
  fs::remove_all(clean.parent_path());
}
