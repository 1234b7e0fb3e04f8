// Elastic workers end to end (ps.elastic, `sketchps run --scale`; docs/reliability.md "Elastic
// workers"): real sketchps-server and sketchps-worker processes on loopback scale 4 -> 6 -> 3
// without a restart. Every round's replica check compares each worker with the shards' master copy
// (the run would fail otherwise); here the summary's membership, the records of the joining and
// leaving workers, their weights where they overlap, and the shards' logs are checked.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tools/run.h"

using namespace sketchps;
using namespace sketchps::tools;
namespace fs = std::filesystem;

namespace {

std::vector<nlohmann::json> JsonLines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

nlohmann::json RecordOf(const fs::path& file, std::uint64_t round) {
  for (auto& r : JsonLines(file)) {
    if (r["round"] == round) return r;
  }
  return nullptr;
}

std::string Text(const fs::path& file) {
  std::ifstream in(file);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("Workers join and leave a running job: 4 then 6 then 3", "[run][processes][elastic]") {
  const fs::path dir = fs::temp_directory_path() / ("sketchps-elastic-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  RunOptions o;
  o.out = dir.string();
  o.progress = false;
  o.plots = false;
  o.job.log_level = "info";
  o.job.overrides = {"model=mlp",          "workers=4",       "servers=2",
                     "scheme.name=topk",   "train.rounds=60", "train.eval_every_rounds=20",
                     "job_id=elastic-test"};
  o.scale = {"20:6", "40:3"};
  REQUIRE(RunJob(o) == 0);

  std::ifstream in(dir / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  CHECK(summary["rounds"] == 60);
  const auto& m = summary["membership"];
  REQUIRE(m.size() == 3);
  CHECK(m[0]["round"] == 0);
  CHECK(m[0]["members"] == nlohmann::json({0, 1, 2, 3}));
  CHECK(m[1]["round"] == 20);
  CHECK(m[1]["members"] == nlohmann::json({0, 1, 2, 3, 4, 5}));
  CHECK(m[2]["round"] == 40);
  CHECK(m[2]["members"] == nlohmann::json({0, 1, 2}));

  // Joiners record rounds 20..39, leavers stop before round 40, the rest record all 60.
  const auto joined = JsonLines(dir / "worker-4.jsonl");
  REQUIRE(joined.size() == 20);
  CHECK(joined.front()["round"] == 20);
  CHECK(JsonLines(dir / "worker-3.jsonl").size() == 40);
  CHECK(JsonLines(dir / "worker-0.jsonl").size() == 60);
  // Where they overlap, every worker holds the same weights.
  for (const char* name : {"worker-3.jsonl", "worker-4.jsonl", "worker-5.jsonl"}) {
    CHECK(RecordOf(dir / name, 39)["checksum"] == RecordOf(dir / "worker-0.jsonl", 39)["checksum"]);
  }
  CHECK(JsonLines(dir / "worker-2.jsonl").back()["checksum"] == JsonLines(dir / "worker-0.jsonl").back()["checksum"]);
  // The evaluation of round 39 took six shares, the final one three, and both covered the same images.
  const auto mid = RecordOf(dir / "worker-0.jsonl", 39);
  const auto last = JsonLines(dir / "worker-0.jsonl").back();
  REQUIRE(mid.contains("test_samples"));
  REQUIRE(last.contains("final"));
  CHECK(last["test_samples"].get<double>() > 0);
  // The shards say who came and went.
  const std::string log = Text(dir / "server-0.log");
  CHECK_THAT(log, Catch::Contains("worker 4 joins at round 20"));
  CHECK_THAT(log, Catch::Contains("worker 5 left the job before round 40 (members left: "));
  fs::remove_all(dir);
}
