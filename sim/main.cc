// sketchps-sim: many workers in one process (`sketchps simulate ...` runs this program with the same
// arguments; sim/simulator.h). The job spec is read as `sketchps run` reads it (--job, --set); the
// simulator's own flags choose the data partition and the participation.
//
//   sketchps simulate --set model=mlp --set workers=64 --set scheme.name=fetchsgd \
//       --partition dirichlet:0.1 --participation 0.1 --out runs/sim/fetchsgd
//
// Writes OUT/records.jsonl (a record per round) and OUT/summary.json (sim/sim_record.h); progress
// on stderr. Exit 0 on success, 2 for bad flags or a job that cannot run, 1 for a failed run.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/config/cli.h"
#include "common/reason.h"
#include "sim/simulator.h"

namespace {

struct Flags {
  sketchps::JobFlags job;
  std::string partition = "iid";
  double participation = 1.0;
  std::uint64_t seed = 0;
  std::uint64_t eval_every = 0;
  std::uint64_t eval_samples = 0;
  std::uint64_t progress_every = 50;
  int torch_threads = 1;
  std::string out;
};

void AddFlags(CLI::App& app, Flags& f) {
  sketchps::AddJobFlags(app, f.job);
  app.add_option("--partition", f.partition,
                 "Training data per worker: iid (the job's data order), dirichlet:ALPHA (label skew; ALPHA > 0 "
                 "or inf), classes:K (K labels per worker, K in 1, 2, 5)")
      ->capture_default_str();
  app.add_option("--participation", f.participation, "Fraction of the workers drawn each round, in (0, 1]")
      ->capture_default_str();
  app.add_option("--seed", f.seed, "Seed of the partition and the draws (default: the job's train.seed)");
  app.add_option("--eval-every", f.eval_every, "Evaluate every N rounds (default: train.eval_every_rounds)");
  app.add_option("--eval-samples", f.eval_samples,
                 "Test images of the intermediate evaluations (default: "
                 "train.eval_samples; 0: all)");
  app.add_option("--progress-every", f.progress_every, "A progress line on stderr every N rounds (0: none)")
      ->capture_default_str();
  app.add_option("--torch-threads", f.torch_threads, "libtorch intra-op threads of the gradient computations")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--out", f.out, "Folder for records.jsonl and summary.json")->required();
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "simulate: %s\n", std::string(status.message()).c_str());
  return status.code() == absl::StatusCode::kInvalidArgument || status.code() == absl::StatusCode::kNotFound ? 2 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // `sketchps simulate ARGS` runs this program with its own argv: skip the subcommand's name.
  if (argc > 1 && std::strcmp(argv[1], "simulate") == 0) {
    argv[1] = argv[0];
    ++argv;
    --argc;
  }
  CLI::App app{"sketchps simulate: P workers in one process, with the real schemes"};
  Flags flags;
  AddFlags(app, flags);
  if (auto code = sketchps::ParseCommandLine(app, argc, argv)) return *code;
  sketchps::ConfigureLogging(flags.job, "simulate");
  sketchps::sim::SimOptions o;
  auto job = sketchps::LoadJobSpec(flags.job.job_path, flags.job.overrides);
  if (!job.ok()) return Fail(job.status());
  o.job = *std::move(job);
  auto partition = sketchps::sim::ParsePartition(flags.partition);
  if (!partition.ok()) return Fail(partition.status());
  o.partition = *partition;
  o.participation = flags.participation;
  if (app.count("--seed") > 0) o.seed = flags.seed;
  if (app.count("--eval-every") > 0) o.eval_every = flags.eval_every;
  if (app.count("--eval-samples") > 0) o.eval_samples = flags.eval_samples;
  o.progress_every = flags.progress_every;
  o.torch_threads = flags.torch_threads;
  std::error_code ec;
  std::filesystem::create_directories(flags.out, ec);
  std::ofstream records(std::filesystem::path(flags.out) / "records.jsonl");
  if (!records) return Fail(absl::InvalidArgumentError("--out " + flags.out + ": cannot write records.jsonl"));
  auto summary =
      sketchps::sim::Simulate(o, [&records](const nlohmann::json& r) { records << r.dump() << "\n"
                                                                               << std::flush; });
  if (!summary.ok()) return Fail(summary.status());
  std::ofstream(std::filesystem::path(flags.out) / "summary.json") << summary->dump(2) << "\n";
  std::fprintf(stderr, "simulate: %s: final test accuracy %s, uplink compression %.1fx; %s/summary.json\n",
               o.job.scheme.name.c_str(), (*summary)["final_test_accuracy"].dump().c_str(),
               (*summary)["uplink_compression"].get<double>(), flags.out.c_str());
  return 0;
}
