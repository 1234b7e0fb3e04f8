// `sketchps bench --input` (bench/input_bench.h) on dumps whose answer is known: a few large entries
// shared by every worker over small noise.
#include "bench/input_bench.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>

#include <catch2/catch.hpp>

#include "common/splitmix.h"
#include "common/wire/gradient_dump.h"

using namespace sketchps;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kN = 20000;
constexpr int kHeavy = 200;  // k at density 0.01

// Worker w's gradient: kN entries of Laplace noise of scale 0.01, and kHeavy at every 97th index
// with magnitude 10 + w (the same indices on every worker).
std::vector<float> Gradient(std::uint32_t w) {
  std::vector<float> g(kN);
  SplitMix64Rng rng(w + 1);
  for (auto& x : g) {
    const double u = (static_cast<double>(rng.Next() >> 11) + 0.5) / 9007199254740992.0;
    x = static_cast<float>((rng.Next() & 1 ? -0.01 : 0.01) * -std::log(u));
  }
  for (int i = 0; i < kHeavy; ++i) g[97 * i + 5] = (i % 2 ? -1.0f : 1.0f) * static_cast<float>(10 + w);
  return g;
}

}  // namespace

TEST_CASE("Input bench: top-k hits its density and a roomy sketch recalls every heavy entry", "[bench]") {
  const fs::path dir = fs::temp_directory_path() / ("sketchps-input-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  bench::InputOptions o;
  for (std::uint32_t w = 0; w < 2; ++w) {
    GradientDump dump;
    dump.job_id = "t";
    dump.model = "test";
    dump.worker_id = w;
    dump.num_workers = 2;
    dump.round = 3;
    dump.layers = MakeLayerTable({{"w", {kN}}});
    dump.values = Gradient(w);
    o.files.push_back((dir / GradientDumpName(3, w)).string());
    REQUIRE(WriteGradientDump(o.files.back(), dump).ok());
  }
  o.servers = 1;
  o.density = 0.01;  // k = 200: exactly the heavy entries
  o.rows = {5};
  o.cols_factors = {10};
  o.p2s = {2};
  auto report = bench::RunInputBenchmarks(o, nullptr);
  INFO(report.status().message());
  REQUIRE(report.ok());
  bool saw_topk = false;
  for (const auto& row : report->selection) {
    CHECK(row.round == 3);
    if (row.method == "topk") {
      saw_topk = true;
      CHECK(row.density_achieved == Approx(0.01));
    }
  }
  CHECK(saw_topk);
  REQUIRE(report->recall.size() == 1);
  const auto& r = report->recall.front();
  CHECK(r.workers == 2);
  CHECK(r.k == 200);
  CHECK(r.candidates == 400);
  CHECK(r.recall == Approx(1.0));
  CHECK(r.cells_per_element == Approx(5.0 * 2000 / kN));
  CHECK(r.up_bytes == 2 * 5 * 2000 + 4 * 400);
  CHECK_THAT(bench::InputReportMarkdown(*report), Catch::Contains("topk"));

  o.files.push_back((dir / "missing.skgd").string());
  auto missing = bench::RunInputBenchmarks(o, nullptr);
  CHECK(!missing.ok());
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("missing.skgd"));
  o.files.clear();
  CHECK_THAT(std::string(bench::RunInputBenchmarks(o, nullptr).status().message()), Catch::Contains("--input"));
  fs::remove_all(dir);
}
