// sketchps: the command-line front end. Subcommands:
//   run     train a job with S servers and P workers on this machine (tools/run.h); the workers
//           can be a Python training script (--script, tools/run_script.h)
//   health  check a server's grpc.health.v1 status (tools/health.h)
//   compare one job in both modes with one process killed, side by side (tools/compare.h)
//   report  a markdown table of run directories' summaries (tools/report.h); --plot PREFIX draws
//           their test accuracy against time, rounds and bytes (tools/plot.h)
//   bench   benchmark the compression primitives (sketchps-bench, bench/main.cc)
//   export  a run's checkpoints as a PyTorch state_dict file (tools/export.h)
//   loadgen traffic of every scheme against the number of workers P (sketchps-bench)
//   simulate many workers in one process, skewed data, partial participation (sketchps-sim, sim/)
//   launch  the daemons' command lines and ports for other launchers (tools/launch_command.h)
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/config/cli.h"
#include "common/version.h"
#include "kernels/backend.h"
#include "launch/binaries.h"
#include "tools/certs.h"
#include "tools/compare.h"
#include "tools/export.h"
#include "tools/health.h"
#include "tools/launch_command.h"
#include "tools/plot.h"
#include "tools/report.h"
#include "tools/run.h"

namespace {

// `sketchps bench|loadgen ARGS`: sketchps-bench with the same arguments, `sketchps simulate ARGS`:
// sketchps-sim (the benchmarks and the simulator are not linked into the product binaries).
int RunHelperProgram(char** argv, sketchps::launch::Program program) {
  auto bench = sketchps::launch::FindBinary(program, "");
  if (!bench.ok()) {
    std::fprintf(stderr, "sketchps %s: %s\n", argv[1], std::string(bench.status().message()).c_str());
    return 2;
  }
  argv[0] = bench->data();
  execv(bench->c_str(), argv);
  std::fprintf(stderr, "sketchps %s: cannot run %s\n", argv[1], bench->c_str());
  return 1;
}

void AddRunCommand(CLI::App& app, sketchps::tools::RunOptions& options) {
  CLI::App* run = app.add_subcommand("run", "Train a job: S servers and P workers as local processes on loopback");
  sketchps::AddJobFlags(*run, options.job);
  run->add_option_function<std::string>(
         "--mode", [&options](const std::string& mode) { options.job.overrides.push_back("mode=" + mode); },
         "ps (servers and workers) or decentralized (workers only); overrides the job's mode")
      ->check(CLI::IsMember({"ps", "decentralized"}));
  run->add_option("--out", options.out, "Run directory (default runs/<job_id>-<time>)");
  run->add_option("--bin-dir", options.bin_dir, "Directory holding sketchps-server and sketchps-worker");
  run->add_option("--kill", options.kills,
                  "Fault injection: server:<s>@<round> kills shard s after that round and restarts it; "
                  "worker:<r>@<round> kills worker r and restarts it with its saved state (ps mode; in "
                  "decentralized mode for good, its peers regroup)")
      ->allow_extra_args(false);
  run->add_option("--scale", options.scale,
                  "Elastic membership (ps mode): ROUND:N, N workers from round ROUND on, e.g. --scale 120:6 "
                  "--scale 240:3 (the job starts with its `workers`; slots join once, the highest leave first)")
      ->allow_extra_args(false);
  run->add_option("--worker-threads", options.worker_threads, "Threads per worker")->capture_default_str();
  run->add_option(
         "--peer-timeout-seconds", options.peer_timeout_seconds,
         "Decentralized mode: a peer silent this long is declared dead (default: the job's peer.timeout_seconds)")
      ->check(CLI::PositiveNumber);
  run->add_flag("!--no-progress", options.progress, "No live progress line");
  run->add_flag("--insecure", options.insecure,
                "Plaintext connections without identities (default: mutual TLS, "
                "with certificates made in <out>/tls)");
  run->add_option("--script", options.script.path,
                  "Workers run this Python training script (sketchps.torch; "
                  "arguments for it after --)");
  run->add_option("--python", options.script.python, "Python interpreter for --script")->capture_default_str();
  run->add_option("script_args", options.script.args, "Arguments of --script (after --)");
  run->add_option("--dump-gradients", options.dump_rounds,
                  "Workers write their gradients of these rounds (comma-separated) to <out>/gradients")
      ->delimiter(',');
  run->add_flag("--resume", options.resume,
                "Continue the run in --out from its checkpoints (ps mode); without it a "
                "run directory that holds a previous run is refused");
  run->add_flag("!--no-plot", options.plots, "Do not draw accuracy.png / recovery.png (and .svg)");
  run->add_flag("--servers-only", options.servers_only,
                "ps mode: start the servers, print the workers' environment (also <out>/workers.env) and wait "
                "until the workers, started by another launcher such as torchrun, have left");
}

struct ReportOptions {
  std::vector<std::string> run_dirs;
  std::string plot;
};

void AddReportCommand(CLI::App& app, ReportOptions& options) {
  CLI::App* report = app.add_subcommand("report", "Markdown table of run directories (their summary.json)");
  report->add_option("run_dirs", options.run_dirs, "Run directories written by `sketchps run`")->required();
  report->add_option("--plot", options.plot,
                     "Also draw test accuracy against wall time, rounds and bytes, every run "
                     "side by side, into PLOT.png and PLOT.svg, and their recovery figures into "
                     "PLOT-recovery.png/.svg (python3 with matplotlib)");
}

int Report(const ReportOptions& options) {
  auto table = sketchps::tools::MarkdownReport(options.run_dirs);
  if (!table.ok()) {
    std::fprintf(stderr, "sketchps report: %s\n", std::string(table.status().message()).c_str());
    return 2;
  }
  std::cout << *table;
  if (options.plot.empty()) return 0;
  if (auto st = sketchps::tools::WritePlots(options.run_dirs, options.plot, options.plot + "-recovery"); !st.ok()) {
    std::fprintf(stderr, "sketchps report: %s\n", std::string(st.message()).c_str());
    return st.code() == absl::StatusCode::kInternal ? 1 : 2;
  }
  std::fprintf(stderr, "sketchps report: wrote %s.png and %s.svg\n", options.plot.c_str(), options.plot.c_str());
  return 0;
}

void AddCertsCommand(CLI::App& app, sketchps::tools::CertsOptions& options) {
  CLI::App* certs =
      app.add_subcommand("certs", "Make a CA and the certificates of every worker and server (mutual TLS)");
  certs->add_option("--out", options.out, "Folder for ca.pem/.key, worker-<r>.pem/.key, server-<s>.pem/.key")
      ->required();
  certs->add_option("--workers", options.workers, "Worker identities worker-0 .. worker-(N-1)")->capture_default_str();
  certs->add_option("--servers", options.servers, "Server identities server-0 .. server-(N-1)")->capture_default_str();
  certs->add_option("--days", options.days, "Validity in days")->capture_default_str();
  certs->add_flag("--new-ca", options.new_ca, "Make a new CA even when the folder holds one (rotation)");
}

struct HealthOptions {
  std::string address;
  std::string service;
  double timeout = 2.0;
};

void AddHealthCommand(CLI::App& app, HealthOptions& options) {
  CLI::App* health = app.add_subcommand("health", "Exit 0 when the server at HOST:PORT reports SERVING");
  health->add_option("address", options.address, "HOST:PORT")->required();
  health->add_option("--service", options.service, "Service name (empty: the server as a whole)");
  health->add_option("--timeout", options.timeout, "Seconds")->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::string(argv[1]) == "bench" || std::string(argv[1]) == "loadgen")) {
    return RunHelperProgram(argv, sketchps::launch::Program::kBench);
  }
  if (argc > 1 && std::string(argv[1]) == "simulate") return RunHelperProgram(argv, sketchps::launch::Program::kSim);
  CLI::App app{"sketchps: compressed-gradient parameter server"};
  app.set_version_flag("--version", std::string("sketchps ") + sketchps::Version() + " (" +
                                        sketchps::kernels::BackendName() + " kernels)");
  app.require_subcommand(1);
  // `bench` and `loadgen` are sketchps-bench's: listed here, run there with the same arguments.
  app.add_subcommand("bench", "Benchmark the compression primitives (runs sketchps-bench)")
      ->allow_extras()
      ->prefix_command();
  app.add_subcommand("loadgen", "Traffic of every scheme against P (runs sketchps-bench)")
      ->allow_extras()
      ->prefix_command();
  app.add_subcommand("simulate", "P workers in one process: skewed data, partial participation (runs sketchps-sim)")
      ->allow_extras()
      ->prefix_command();
  std::function<int()> launch_run;
  sketchps::tools::AddLaunchCommand(app, launch_run);
  sketchps::tools::RunOptions run_options;
  AddRunCommand(app, run_options);
  HealthOptions health_options;
  AddHealthCommand(app, health_options);
  sketchps::tools::CertsOptions certs_options;
  AddCertsCommand(app, certs_options);
  sketchps::tools::CompareOptions compare_options;
  CLI::App* compare =
      app.add_subcommand("compare", "Run one job in ps and decentralized mode, kill one process in each, compare");
  sketchps::AddJobFlags(*compare, compare_options.job);
  compare->add_option("--out", compare_options.out, "Directory for both runs and compare.md")->capture_default_str();
  compare->add_option("--kill-round", compare_options.kill_round, "Kill after this many rounds")->capture_default_str();
  compare
      ->add_option("--peer-timeout-seconds", compare_options.peer_timeout_seconds,
                   "Decentralized mode: a peer silent this long is declared dead")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  compare->add_option("--bin-dir", compare_options.bin_dir, "Directory holding sketchps-server and sketchps-worker");
  ReportOptions report_options;
  AddReportCommand(app, report_options);
  sketchps::tools::ScriptOptions export_python;
  CLI::App* exporter = app.add_subcommand("export",
                                          "A run's server checkpoints as a PyTorch state_dict file "
                                          "(RUN_DIR [--out F], or --job J --checkpoints DIR --out F)");
  exporter->add_option("--python", export_python.python, "Python interpreter with torch")->capture_default_str();
  exporter->allow_extras();
  // A bad flag or value exits 2 (CLI11's own codes 104-109 would read as runtime failures).
  if (auto code = sketchps::ParseCommandLine(app, argc, argv)) return *code;
  if (app.got_subcommand("export")) return sketchps::tools::ExportModel(export_python, exporter->remaining());
  if (launch_run) return launch_run();
  if (app.got_subcommand("run")) return sketchps::tools::RunJob(run_options);
  if (app.got_subcommand("compare")) return sketchps::tools::CompareModes(compare_options);
  if (app.got_subcommand("report")) return Report(report_options);
  if (app.got_subcommand("certs")) {
    if (auto st = sketchps::tools::MakeCerts(certs_options); !st.ok()) {
      std::fprintf(stderr, "sketchps certs: %s\n", std::string(st.message()).c_str());
      return 2;
    }
    std::fprintf(stderr, "sketchps certs: %s holds the CA and %u worker and %u server certificates\n",
                 certs_options.out.c_str(), certs_options.workers, certs_options.servers);
    return 0;
  }
  if (app.got_subcommand("health")) {
    return sketchps::tools::CheckHealth(health_options.address, health_options.service, health_options.timeout);
  }
  return 1;
}
