// `sketchps report --plot`: the series taken from a run directory, and the PNG and SVG drawn from
// them by python3 with matplotlib.
#include "tools/plot.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace sketchps::tools;
namespace fs = std::filesystem;

namespace {

fs::path MakeRun(const fs::path& root, const std::string& name, bool evaluations, bool losses = true) {
  const fs::path dir = root / name;
  fs::create_directories(dir);
  std::ofstream(dir / "summary.json") << nlohmann::json{
      {"scheme", "topk"},
      {"mode", "decentralized"},
      {"workers", 3}}.dump();
  std::ofstream metrics(dir / "metrics.jsonl");
  for (int r = 0; r < 4; ++r) {
    nlohmann::json rec{{"round", r},
                       {"round_start", 50.0 + 2 * r},
                       {"time", 51.0 + 2 * r},
                       {"bytes_up", 100.0 * (r + 1)},
                       {"bytes_down", 10.0}};
    if (losses && r != 2) rec["loss"] = 2.0 - 0.5 * r;  // round 2: a step() without a loss
    if (evaluations && r % 2 == 1) {
      rec["test_accuracy"] = 0.5 + 0.1 * r;
      rec["test_round"] = r;
    }
    metrics << rec.dump() << "\n";
  }
  return dir;
}

std::string Head(const fs::path& file, std::size_t n) {
  std::ifstream in(file, std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  return s.substr(0, static_cast<std::size_t>(in.gcount()));
}

struct Scratch {
  fs::path path = fs::temp_directory_path() / ("sketchps-plot-test-" + std::to_string(::getpid()));
  Scratch() { fs::remove_all(path); }
  ~Scratch() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("Plot series take one point per evaluation with cumulative bytes and time since the start", "[tools]") {
  Scratch scratch;
  auto series = LoadPlotSeries(MakeRun(scratch.path, "run-a", true).string() + "/");
  REQUIRE(series.ok());
  CHECK(series->label == "run-a: topk, decentralized, 3 workers");
  // Rounds 1 and 3 carry evaluations; bytes: (100 + 10) + (200 + 10) = 320, then + 310 + 410 = 1040.
  CHECK(series->rounds == std::vector<double>{2, 4});
  CHECK(series->bytes == std::vector<double>{320, 1040});
  CHECK(series->seconds == std::vector<double>{3, 7});  // times 53 and 57, training began at 50
  REQUIRE(series->accuracy.size() == 2);
  CHECK(series->accuracy[1] == Approx(0.8));
  CHECK(series->loss_rounds == std::vector<double>{1, 2, 4});
  CHECK(series->loss == std::vector<double>{2.0, 1.5, 0.5});
  CHECK(LoadPlotSeries((scratch.path / "none").string()).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("report --plot draws a PNG and an SVG of several runs", "[tools][python]") {
  Scratch scratch;
  const auto a = MakeRun(scratch.path, "a", true), b = MakeRun(scratch.path, "b", true);
  const fs::path prefix = scratch.path / "plots" / "cmp";
  REQUIRE(WritePlots({a.string(), b.string()}, prefix.string()).ok());
  CHECK(Head(fs::path(prefix.string() + ".png"), 8) == "\x89PNG\r\n\x1a\n");
  std::ifstream svg(prefix.string() + ".svg");
  const std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("<svg") && Catch::Contains("test accuracy (%)") && Catch::Contains("a: topk") &&
                       Catch::Contains("training loss") && Catch::Contains("MB one worker"));
}

TEST_CASE("report --plot draws the loss of a run that never evaluated", "[tools][python]") {
  Scratch scratch;
  const fs::path prefix = scratch.path / "quiet-plot";
  REQUIRE(WritePlots({MakeRun(scratch.path, "quiet", false).string()}, prefix.string()).ok());
  std::ifstream svg(prefix.string() + ".svg");
  const std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("training loss") && Catch::Contains("no evaluation"));
}

TEST_CASE("report --plot names what is missing: evaluations, the interpreter", "[tools]") {
  Scratch scratch;
  const auto quiet = MakeRun(scratch.path, "quiet", false, /*losses=*/false);
  auto none = WritePlots({quiet.string()}, (scratch.path / "p").string());
  CHECK(none.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(none.message()), Catch::Contains("no run has an evaluation or a training loss"));
  const auto run = MakeRun(scratch.path, "run", true);
  ::setenv("SKETCHPS_PYTHON", "/nonexistent/python3", 1);
  auto missing = WritePlots({run.string()}, (scratch.path / "p").string());
  ::unsetenv("SKETCHPS_PYTHON");
  CHECK(missing.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(missing.message()),
             Catch::Contains("/nonexistent/python3") && Catch::Contains("python3-matplotlib"));
}
