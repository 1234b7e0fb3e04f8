// The simulator against the real system: at P = 4 with the iid partition (the job's data order) and
// every worker taking part, `sketchps simulate` must compute what `sketchps run` computes with real
// sketchps-server and sketchps-worker processes: the weights after every round, bitwise (the
// per-round checksums of worker 0's metrics.jsonl), and the bytes a worker pushed (the mean over the
// workers), up to the request headers the simulator leaves out. Also: the front end runs the simulator.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "launch/child.h"
#include "sim/simulator.h"
#include "tools/run.h"

using namespace sketchps;
namespace fs = std::filesystem;

namespace {

fs::path TempDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("sketchps-sim-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  return dir;
}

std::vector<nlohmann::json> JsonLines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::vector<std::string> Overrides(const std::string& scheme) {
  return {"model=mlp",
          "workers=4",
          "servers=2",
          "train.rounds=12",
          "train.eval_every_rounds=0",
          "scheme.name=" + scheme,
          "job_id=sim-" + scheme};
}

// Runs the job with real processes and in the simulator, and compares them round by round.
void ExpectSimulatorEqualsRun(const std::string& scheme) {
  const fs::path dir = TempDir(scheme);
  tools::RunOptions run;
  run.out = dir.string();
  run.progress = false;
  run.plots = false;
  run.job.log_level = "warn";
  run.job.overrides = Overrides(scheme);
  REQUIRE(tools::RunJob(run) == 0);
  const auto real = JsonLines(dir / "worker-0.jsonl");
  std::vector<std::vector<nlohmann::json>> ranks;  // every worker's records: the simulator's bytes are means
  for (int w = 0; w < 4; ++w) ranks.push_back(JsonLines(dir / ("worker-" + std::to_string(w) + ".jsonl")));

  sim::SimOptions o;
  auto job = LoadJobSpec("", Overrides(scheme));
  REQUIRE(job.ok());
  o.job = *job;
  std::vector<nlohmann::json> simulated;
  auto summary = sim::Simulate(o, [&](const nlohmann::json& r) { simulated.push_back(r); });
  REQUIRE(summary.ok());
  REQUIRE(real.size() == 12);
  REQUIRE(simulated.size() == 12);
  for (std::size_t r = 0; r < 12; ++r) {
    INFO(scheme << " round " << r);
    CHECK(simulated[r]["checksum"] == real[r]["checksum"]);
    CHECK(simulated[r]["participants"] == 4);
    // The simulator counts payload messages; the run's requests add a header per shard and phase.
    double want = 0;
    for (const auto& w : ranks) want += w.at(r)["bytes_up"].get<double>() / 4;
    const double got = simulated[r]["bytes_up"].get<double>();
    CHECK(got <= want);
    CHECK(got >= 0.98 * want - 2 * 2 * 256);
  }
  fs::remove_all(dir);
}

}  // namespace

// One multi-process run costs about 15 s (6 processes loading libtorch and the data): one scheme, a
// two-phase sketch method, in the CI lane, the others in the long lane.
TEST_CASE("The simulator computes sketchps run's weights every round: gs-SGD", "[sim][processes]") {
  ExpectSimulatorEqualsRun("gs_sgd");
}

TEST_CASE("The simulator computes sketchps run's weights every round: dense, top-k, gTop-k, FetchSGD",
          "[sim][processes][long]") {
  ExpectSimulatorEqualsRun("dense");
  ExpectSimulatorEqualsRun("topk");
  ExpectSimulatorEqualsRun("gtopk");
  ExpectSimulatorEqualsRun("fetchsgd");
}

TEST_CASE("sketchps simulate runs the simulator and writes its records and summary", "[sim][processes]") {
  const fs::path dir = TempDir("front-end");
  const fs::path front = fs::path(launch::SelfExecutable()).parent_path().parent_path() / "tools" / "sketchps";
  const std::string command = front.string() +
                              " simulate --set model=mlp --set workers=8 --set train.rounds=6 --set "
                              "scheme.name=fetchsgd --partition classes:2 --participation 0.25 --eval-every 3 "
                              "--eval-samples 500 --log-level warn --out " +
                              dir.string() + " 2>/dev/null";
  REQUIRE(std::system(command.c_str()) == 0);
  const auto records = JsonLines(dir / "records.jsonl");
  REQUIRE(records.size() == 6);
  for (const auto& r : records) CHECK(r["participants"] == 2);
  CHECK(records[2]["test_samples"] == 500);
  CHECK(records[5]["test_samples"] == 10000);
  std::ifstream in(dir / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  CHECK(summary["config"]["partition"] == "classes:2");
  CHECK(summary["config"]["participants_per_round"] == 2);
  CHECK(summary["final_test_accuracy"].is_number());
  const std::string bad = front.string() + " simulate --partition dirichlet:0 --out " + dir.string() + " 2>/dev/null";
  CHECK(WEXITSTATUS(std::system(bad.c_str())) == 2);
  fs::remove_all(dir.parent_path());
}
