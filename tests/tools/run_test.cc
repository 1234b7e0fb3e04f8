// `sketchps run` end to end: real sketchps-server and sketchps-worker processes on loopback.
//   - a server killed with SIGKILL mid-run and restarted with the same flags: the run completes and
//     its final weights equal an uninterrupted run's, bitwise;
//   - a worker that cannot start (bad data path) stops the run with its name and log lines;
//   - decentralized mode: a peer killed mid-run, the survivors regroup and finish with equal
//     replicas (or stop, with peer.on_failure: stop).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/compare.h"
#include "tools/run.h"

using namespace sketchps::tools;
namespace fs = std::filesystem;

namespace {

fs::path RunDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("sketchps-run-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  return dir;
}

nlohmann::json ReadSummary(const fs::path& dir) {
  std::ifstream in(dir / "summary.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

RunOptions Options(const fs::path& dir, std::vector<std::string> overrides) {
  RunOptions o;
  o.out = dir.string();
  o.progress = false;
  o.job.log_level = "warn";
  o.job.overrides = std::move(overrides);
  return o;
}

}  // namespace

TEST_CASE("A server killed mid-run catches up and ends with an uninterrupted run's weights", "[run][processes]") {
  // gs-SGD has two phases per round, so the restarted shard also exercises the round replay. The
  // shard is killed at round 12: with checkpoints every 5 rounds its newest file holds round 10,
  // without a checkpoint directory it has nothing; either way it catches up from the workers'
  // replicas (server/assembly.h).
  const std::string every = GENERATE(std::string("5"), std::string("1000"));
  const std::vector<std::string> job{"model=mlp", "workers=2", "servers=2", "scheme.name=gs_sgd", "train.rounds=40",
                                     "train.eval_every_rounds=0", "job_id=kill-test", "checkpoint.every_rounds=" + every};
  const fs::path clean = RunDir("clean"), killed = RunDir("killed");
  REQUIRE(RunJob(Options(clean, job)) == 0);
  RunOptions faulty = Options(killed, job);
  faulty.kills = {"server:1@12"};
  faulty.job.log_level = "info";  // the restart logs where its state came from at info
  REQUIRE(RunJob(faulty) == 0);
  const auto a = ReadSummary(clean), b = ReadSummary(killed);
  CHECK(a["rounds"] == 40);
  CHECK(b["rounds"] == 40);
  CHECK(!a["final_weights_checksum"].get<std::string>().empty());
  CHECK(a["final_weights_checksum"] == b["final_weights_checksum"]);
  std::ifstream log(killed / "server-1.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("'s replica at round 1"));  // adopted a worker's replica at round 12 or 13
  if (every == "5") CHECK_THAT(text, Catch::Contains("its checkpoint held round 10"));
  fs::remove_all(clean.parent_path());
}

TEST_CASE("A failing worker stops the run with a non-zero exit", "[run][processes]") {
  const fs::path dir = RunDir("bad-data");
  const auto code = RunJob(Options(dir, {"model=mlp", "workers=2", "servers=1", "train.rounds=5",
                                         "data.path=/nonexistent", "job_id=bad-data"}));
  CHECK(code == 1);
  CHECK(!fs::exists(dir / "summary.json"));
  fs::remove_all(dir.parent_path());
}

TEST_CASE("sketchps run in decentralized mode trains with workers only and equal replicas", "[run][processes]") {
  const fs::path dir = RunDir("decentralized");
  RunOptions o = Options(dir, {"model=mlp", "workers=3", "servers=2", "scheme.name=scalecom", "train.rounds=12",
                               "train.eval_every_rounds=0", "mode=decentralized", "job_id=dec"});
  REQUIRE(RunJob(o) == 0);
  const auto summary = ReadSummary(dir);
  CHECK(summary["rounds"] == 12);
  CHECK(summary["servers"] == 0);
  CHECK(!fs::exists(dir / "server-0.log"));
  std::vector<std::string> checksums;
  for (int r = 0; r < 3; ++r) {
    std::ifstream in(dir / ("worker-" + std::to_string(r) + ".jsonl"));
    std::string line, last;
    while (std::getline(in, line)) last = line;
    checksums.push_back(nlohmann::json::parse(last)["checksum"]);
  }
  CHECK(checksums[0] == checksums[1]);
  CHECK(checksums[0] == checksums[2]);
  CHECK(checksums[0] == summary["final_weights_checksum"]);
  fs::remove_all(dir.parent_path());
}

namespace {

// Each rank's per-round records.
std::vector<nlohmann::json> Records(const fs::path& dir, int rank) {
  std::ifstream in(dir / ("worker-" + std::to_string(rank) + ".jsonl"));
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// A decentralized MLP run of `job_id` with `extra` overrides and one worker killed as `kill` says.
RunOptions PeerKill(const fs::path& dir, const std::string& job_id, const std::vector<std::string>& extra, std::string kill) {
  std::vector<std::string> overrides{"model=mlp", "mode=decentralized", "job_id=" + job_id};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  RunOptions o = Options(dir, overrides);
  o.kills = {std::move(kill)};
  return o;
}

}  // namespace

TEST_CASE("A killed peer: the survivors regroup without it and finish with equal replicas", "[run][processes]") {
  const fs::path dir = RunDir("regroup");
  // Rank 0: the lowest rank coordinates the regroup and evaluates, so both roles move to rank 1.
  REQUIRE(RunJob(PeerKill(dir, "regroup", {"workers=4", "scheme.name=gs_sgd", "train.rounds=24", "train.eval_every_rounds=10",
                                           "peer.timeout_seconds=3"},
                          "worker:0@8")) == 0);
  std::vector<std::string> checksums;
  for (int r : {1, 2, 3}) {
    const auto records = Records(dir, r);
    REQUIRE(!records.empty());
    CHECK(records.back()["round"] == 23);
    CHECK(records.back()["workers"] == 3);
    checksums.push_back(records.back()["checksum"]);
    int regroups = 0;
    for (const auto& rec : records) {
      if (!rec.contains("regroup")) continue;
      ++regroups;
      CHECK(rec["regroup"]["epoch"] == 1);
      CHECK(rec["regroup"]["lost"] == 1);
      CHECK(rec["regroup"]["workers"] == 3);
      CHECK(rec["regroup"]["rounds_redone"].get<int>() <= 1);
    }
    CHECK(regroups == 1);
  }
  CHECK(checksums[0] == checksums[1]);
  CHECK(checksums[0] == checksums[2]);
  CHECK(Records(dir, 0).back()["workers"] == 4);  // the killed rank never saw the regroup
  CHECK(Records(dir, 1).back()["test_round"] == 23);  // old rank 1 evaluates now
  const auto summary = ReadSummary(dir);
  CHECK(summary["reporting_rank"] == 1);
  CHECK(summary["final_weights_checksum"] == checksums[0]);
  CHECK(summary["final_test_accuracy"].is_number());
  fs::remove_all(dir.parent_path());
}

TEST_CASE("With peer.on_failure: stop a killed peer stops the decentralized run with an error", "[run][processes]") {
  const fs::path dir = RunDir("peer-stop");
  CHECK(RunJob(PeerKill(dir, "stop", {"workers=3", "train.rounds=30", "train.eval_every_rounds=0", "peer.timeout_seconds=2",
                                      "peer.on_failure=stop"},
                        "worker:2@4")) == 1);
  std::ifstream in(dir / "faults.json");
  REQUIRE(in.good());
  const auto faults = nlohmann::json::parse(in);
  CHECK(faults.contains("first_failure"));
  CHECK_THAT(faults["first_failure"]["log_tail"].get<std::string>(), Catch::Contains("rank 2"));
  CHECK(!fs::exists(dir / "summary.json"));
  fs::remove_all(dir.parent_path());
}

TEST_CASE("sketchps compare kills a shard and a peer and reports both outcomes", "[run][processes]") {
  const fs::path dir = RunDir("compare");
  CompareOptions o;
  o.out = dir.string();
  o.kill_round = 6;
  o.peer_timeout_seconds = 3;
  o.job.log_level = "warn";
  o.job.overrides = {"model=mlp", "workers=3", "servers=2", "train.rounds=16", "train.eval_every_rounds=0", "job_id=cmp"};
  REQUIRE(CompareModes(o) == 0);
  std::ifstream in(dir / "compare.json");
  const auto rows = nlohmann::json::parse(in);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["mode"] == "ps");
  CHECK(rows[0]["rounds_lost"] == 0);
  CHECK(rows[0].contains("seconds_to_recover"));
  CHECK(rows[1]["mode"] == "decentralized");
  CHECK(rows[1]["exit_code"] == 0);
  CHECK(rows[1]["workers_at_end"] == 2);
  CHECK(rows[1]["rounds_lost"].get<int>() <= 1);
  // Detected within the peer timeout plus the step grace and the abort notices, then the probe of
  // the dead rank (peer/regroup.h), plus scheduling noise.
  CHECK(rows[1]["seconds_to_recover"].get<double>() < 3 + 3 + 2 + 5);
  CHECK(fs::exists(dir / "compare.md"));
  fs::remove_all(dir.parent_path());
}
