// sketchps: the command-line front end. Subcommands:
//   bench   benchmark the compression primitives (bench/primitives.h)
#include <cstdio>
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "bench/primitives.h"
#include "bench/report.h"
#include "common/version.h"
#include "kernels/backend.h"

namespace {

void AddBenchCommand(CLI::App& app, sketchps::bench::BenchOptions& options, bool& json) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmark the compression primitives on a heavy-tailed gradient");
  bench->add_option("--d", options.d, "Gradient length")->capture_default_str();
  bench->add_option("--density", options.density, "Target density k/d")->capture_default_str();
  bench->add_option("--methods", options.methods, "Comma-separated subset of: " + [] {
    std::string all;
    for (const auto& m : sketchps::bench::AllMethods()) all += (all.empty() ? "" : ",") + m;
    return all;
  }())->delimiter(',');
  bench->add_option("--repeats", options.repeats, "Timed runs per method (median reported)")->capture_default_str();
  bench->add_option("--seed", options.seed, "Data and hash seed")->capture_default_str();
  bench->add_option("--sketch-rows", options.sketch_rows, "Count Sketch rows")->capture_default_str();
  bench->add_option("--sketch-cols", options.sketch_cols, "Count Sketch columns (0: 10*k)")->capture_default_str();
  bench->add_flag("--json", json, "Print results as a JSON list instead of a table");
}

int RunBench(const sketchps::bench::BenchOptions& options, bool json) {
  auto progress = [](const std::string& line) { std::fprintf(stderr, "bench: %s\n", line.c_str()); };
  auto results = sketchps::bench::RunBenchmarks(options, progress);
  if (!results.ok()) {
    std::fprintf(stderr, "sketchps bench: %s\n", std::string(results.status().message()).c_str());
    return 2;
  }
  if (json) {
    std::cout << sketchps::bench::ToJson(*results).dump(2) << "\n";
  } else {
    std::cout << sketchps::bench::ToTable(*results);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sketchps: compressed-gradient parameter server"};
  app.set_version_flag("--version", std::string("sketchps ") + sketchps::Version() + " (" +
                                        sketchps::kernels::BackendName() + " kernels)");
  app.require_subcommand(1);
  sketchps::bench::BenchOptions bench_options;
  bool json = false;
  AddBenchCommand(app, bench_options, json);
  CLI11_PARSE(app, argc, argv);
  if (app.got_subcommand("bench")) return RunBench(bench_options, json);
  return 1;
}
