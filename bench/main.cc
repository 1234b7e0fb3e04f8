// sketchps-bench: the benchmarks, apart from the product binaries (`sketchps bench ...` and
// `sketchps loadgen ...` run this program with the same arguments). Subcommands:
//   bench   the compression primitives on a synthetic or real gradient (bench/primitives.h,
//           bench/input_bench.h)
//   loadgen traffic of every scheme against the number of workers P (bench/loadgen/loadgen.h)
// Exit 0 on success, 2 for bad flags or inputs, 1 for a failed run.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/input_bench.h"
#include "bench/loadgen/loadgen.h"
#include "bench/primitives.h"
#include "bench/report.h"
#include "common/config/cli.h"
#include "common/version.h"
#include "kernels/backend.h"

namespace {

struct BenchFlags {
  sketchps::bench::BenchOptions synthetic;
  sketchps::bench::InputOptions input;  // used when --input is given
  bool json = false;
};

// --input: real gradients dumped by the workers (bench/input_bench.h) instead of synthetic ones.
void AddInputOptions(CLI::App& bench, sketchps::bench::InputOptions& input) {
  bench.add_option("--input", input.files,
                   "Gradient dumps (`sketchps run --dump-gradients`): selection density and "
                   "sketch recall on real gradients instead of timings on a synthetic one");
  bench.add_option("--servers", input.servers, "--input: shards the layout is split into")->capture_default_str();
  bench.add_option("--rows", input.rows, "--input: sketch row counts to try")->delimiter(',')->capture_default_str();
  bench.add_option("--cols-factors", input.cols_factors, "--input: sketch columns per kept entry to try")
      ->delimiter(',')
      ->capture_default_str();
  bench.add_option("--p2", input.p2s, "--input: candidates per kept entry to try")
      ->delimiter(',')
      ->capture_default_str();
}

void AddBenchCommand(CLI::App& app, BenchFlags& flags) {
  sketchps::bench::BenchOptions& options = flags.synthetic;
  CLI::App* bench = app.add_subcommand("bench", "Benchmark the compression primitives on a heavy-tailed gradient");
  bench->add_option("--d", options.d, "Gradient length; several (comma-separated) run one after another")
      ->delimiter(',')
      ->capture_default_str();
  bench->add_option("--density", options.density, "Target density k/d")->capture_default_str();
  bench
      ->add_option(
          "--methods", options.methods,
          "Comma-separated subset of: " +
              [] {
                std::string all;
                for (const auto& m : sketchps::bench::AllMethods()) all += (all.empty() ? "" : ",") + m;
                return all;
              }())
      ->delimiter(',');
  bench->add_option("--repeats", options.repeats, "Timed runs per method (median reported)")->capture_default_str();
  bench->add_option("--seed", options.seed, "Data and hash seed")->capture_default_str();
  bench->add_option("--sketch-rows", options.sketch_rows, "Count Sketch rows")->capture_default_str();
  bench->add_option("--sketch-cols", options.sketch_cols, "Count Sketch columns (0: 10*k)")->capture_default_str();
  bench->add_flag("--json", flags.json, "Print results as a JSON list instead of a table");
  AddInputOptions(*bench, flags.input);
}

int RunInputBench(sketchps::bench::InputOptions input, const sketchps::bench::BenchOptions& synthetic) {
  input.density = synthetic.density;
  input.seed = synthetic.seed;
  auto progress = [](const std::string& line) { std::fprintf(stderr, "bench: %s\n", line.c_str()); };
  auto report = sketchps::bench::RunInputBenchmarks(input, progress);
  if (!report.ok()) {
    std::fprintf(stderr, "sketchps bench: %s\n", std::string(report.status().message()).c_str());
    return 2;
  }
  std::cout << sketchps::bench::InputReportMarkdown(*report);
  return 0;
}

int RunBench(const BenchFlags& flags) {
  if (!flags.input.files.empty()) return RunInputBench(flags.input, flags.synthetic);
  const sketchps::bench::BenchOptions& options = flags.synthetic;
  const bool json = flags.json;
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
  CLI::App app{"sketchps-bench: the benchmarks of sketchps (also `sketchps bench`, `sketchps loadgen`)"};
  app.set_version_flag("--version", std::string("sketchps-bench ") + sketchps::Version() + " (" +
                                        sketchps::kernels::BackendName() + " kernels)");
  app.require_subcommand(1);
  BenchFlags bench_flags;
  AddBenchCommand(app, bench_flags);
  sketchps::bench::LoadgenOptions loadgen_options;
  sketchps::bench::AddLoadgenCommand(app, loadgen_options);
  if (auto code = sketchps::ParseCommandLine(app, argc, argv)) return *code;
  if (!sketchps::kernels::BackendRunsOrExplain("sketchps-bench")) return 2;  // e.g. CUDA kernels, no device
  if (app.got_subcommand("bench")) return RunBench(bench_flags);
  if (app.got_subcommand("loadgen")) return sketchps::bench::RunLoadgen(loadgen_options);
  return 1;
}
