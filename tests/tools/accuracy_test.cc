// Every scheme trains the CNN on Fashion-MNIST to >= 80% test accuracy with 4 workers and 2 servers
// (real processes, `sketchps run`) within a round budget of batch 4 x 32: 200 rounds (0.43 epochs),
// 300 for DGC and SDAGC, whose local momentum correction lags early (at 200 rounds DGC measured
// 78.1% and SDAGC 79.2%; DGC 82.0% at 300, docs/results.md). The CI-sized version of the default job.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tools/run.h"

using namespace sketchps::tools;
namespace fs = std::filesystem;

namespace {

constexpr double kMinAccuracy = 0.80;

void ExpectTrains(const std::string& scheme, int rounds) {
  const fs::path dir = fs::temp_directory_path() / ("sketchps-accuracy-" + std::to_string(::getpid())) / scheme;
  fs::remove_all(dir);
  RunOptions o;
  o.out = dir.string();
  o.progress = false;
  o.job.log_level = "warn";
  o.job.overrides = {"scheme.name=" + scheme, "train.rounds=" + std::to_string(rounds), "train.eval_every_rounds=0", "job_id=acc-" + scheme};
  REQUIRE(RunJob(o) == 0);
  std::ifstream in(dir / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  INFO(summary.dump(2));
  CHECK(summary["workers"] == 4);
  CHECK(summary["model"] == "cnn");
  CHECK(summary["rounds"] == rounds);
  CHECK(summary["final_test_accuracy"].get<double>() >= kMinAccuracy);
  fs::remove_all(dir.parent_path());
}

}  // namespace

#define SKETCHPS_ACCURACY_TEST(scheme, rounds)                                                    \
  TEST_CASE("The CNN reaches 80 percent with " scheme, "[run][processes][accuracy]") { \
    ExpectTrains(scheme, rounds);                                                     \
  }

SKETCHPS_ACCURACY_TEST("dense", 200)
SKETCHPS_ACCURACY_TEST("topk", 200)
SKETCHPS_ACCURACY_TEST("dgc", 300)
SKETCHPS_ACCURACY_TEST("gtopk", 200)
SKETCHPS_ACCURACY_TEST("sketched_sgd", 200)
SKETCHPS_ACCURACY_TEST("gs_sgd", 200)
SKETCHPS_ACCURACY_TEST("sdagc", 300)
SKETCHPS_ACCURACY_TEST("sidco", 200)
SKETCHPS_ACCURACY_TEST("scalecom", 200)
