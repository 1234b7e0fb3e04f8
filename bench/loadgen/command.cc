// `sketchps loadgen`: its flags, their validation and the dispatch to the sweep, one configuration
// (--single) or the calibration (bench/loadgen/loadgen.h).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/loadgen/calibrate.h"
#include "bench/loadgen/gradient_dumps.h"
#include "bench/loadgen/loadgen.h"
#include "bench/loadgen/single.h"
#include "bench/loadgen/sweep.h"
#include "common/config/cli.h"
#include "common/status.h"
#include "common/wire/layout_proto.h"
#include "job/model_layout.h"
#include "schemes/registry.h"
#include "spdlog/spdlog.h"

namespace sketchps::bench {
namespace fs = std::filesystem;
namespace {

bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::vector<std::string> SchemesOf(const LoadgenOptions& o) { return o.schemes.empty() ? DefaultSchemes() : o.schemes; }

absl::Status ValidateLists(const LoadgenOptions& o) {
  if (o.modes.empty()) return absl::InvalidArgumentError("--mode: give ps and/or decentralized");
  for (const auto& m : o.modes) {
    if (m != "ps" && m != "decentralized")
      return absl::InvalidArgumentError(absl::StrCat("--mode: '", m, "' is not ps or decentralized"));
  }
  if (o.workers.empty()) return absl::InvalidArgumentError("--workers: give at least one P");
  for (std::uint32_t p : o.workers) {
    if (p < 1 || p > 1024) return absl::InvalidArgumentError(absl::StrCat("--workers: ", p, " is not in [1, 1024]"));
  }
  const std::vector<std::string> known = DefaultSchemes();
  for (const auto& s : SchemesOf(o)) {
    if (s != kTreeVariant && !Has(known, s)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--schemes: unknown scheme '", s, "' (known: ", absl::StrJoin(known, ", "), ", ", kTreeVariant, ")"));
    }
  }
  if (Has(SchemesOf(o), kTreeVariant) && !Has(o.modes, "decentralized")) {
    return absl::InvalidArgumentError("--schemes gtopk_tree: the tree merge needs --mode decentralized");
  }
  if (o.rounds == 0) return absl::InvalidArgumentError("--rounds: must be >= 1");
  if (o.servers == 0) return absl::InvalidArgumentError("--servers: must be >= 1");
  if (o.params != 0) {
    if (o.params < kMinFlatParams || o.params > kMaxFlatParams) {
      return absl::InvalidArgumentError(
          absl::StrCat("--params: ", o.params, " is not in [", kMinFlatParams, ", ", kMaxFlatParams, "]"));
    }
    if (o.params < o.servers) {
      return absl::InvalidArgumentError(
          absl::StrCat("--params: ", o.params, " parameters cannot be split over ", o.servers, " shards (--servers)"));
    }
    if (!o.gradients_dir.empty()) {
      return absl::InvalidArgumentError("--params: the dumps of --gradients have their model's layout, not a flat one");
    }
  }
  return absl::OkStatus();
}

// Binds every scheme's job once, so that unknown schemes and refused --set overrides fail now.
absl::Status ValidateJobs(const LoadgenOptions& o) {
  if (o.params == 0) SKETCHPS_RETURN_IF_ERROR(ModelLayout(o.model).status());
  for (ConfigSpec spec : SweepConfigs(o)) {
    auto job = ConfigJob(spec);
    if (!job.ok()) return absl::InvalidArgumentError(absl::StrCat(spec.scheme, ": ", job.status().message()));
  }
  return absl::OkStatus();
}

absl::Status ValidateGradients(const LoadgenOptions& o) {
  if (o.gradients_dir.empty()) return absl::OkStatus();
  SKETCHPS_ASSIGN_OR_RETURN(const LoadedGradients dumps, LoadGradientDumps(o.gradients_dir));
  SKETCHPS_ASSIGN_OR_RETURN(const LayerTable layers, ModelLayout(o.model));
  if (!SameLayers(dumps.layers, layers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gradients ", o.gradients_dir, ": the dumps are not of model ", o.model, " (--model)"));
  }
  return absl::OkStatus();
}

absl::Status ValidatePaths(const LoadgenOptions& o) {
  if (!o.out.empty()) {
    const std::string probe = o.out + ".tmp";
    if (!std::ofstream(probe)) return absl::InvalidArgumentError(absl::StrCat("--out ", o.out, ": cannot write there"));
    std::error_code ec;
    fs::remove(probe, ec);
  }
  if (!o.work_dir.empty()) {
    std::error_code ec;
    fs::create_directories(o.work_dir, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("--work-dir ", o.work_dir, ": ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> DefaultSchemes() { return SchemeNames(); }

absl::Status ValidateOptions(const LoadgenOptions& o) {
  SKETCHPS_RETURN_IF_ERROR(ValidateLists(o));
  SKETCHPS_RETURN_IF_ERROR(ValidateJobs(o));
  SKETCHPS_RETURN_IF_ERROR(ValidateGradients(o));
  return ValidatePaths(o);
}

std::vector<ConfigSpec> SweepConfigs(const LoadgenOptions& o) {
  std::vector<ConfigSpec> out;
  for (const auto& mode : o.modes) {
    for (const auto& scheme : SchemesOf(o)) {
      if (scheme == kTreeVariant && mode != "decentralized") continue;
      for (std::uint32_t p : o.workers) {
        ConfigSpec c;
        c.mode = mode;
        c.scheme = scheme;
        c.workers = p;
        c.servers = o.servers;
        c.model = o.model;
        c.params = o.params;
        c.density = o.density;
        c.warmup_rounds = o.warmup_rounds;
        c.rounds = o.rounds;
        c.overrides = o.overrides;
        c.gradients_dir = o.gradients_dir;
        c.correlation = o.correlation;
        c.seed = o.seed;
        c.epoch = o.epoch;
        c.timeout_seconds = o.timeout_seconds;
        c.stream_bytes_per_second = o.stream_bytes_per_second;
        out.push_back(std::move(c));
      }
    }
  }
  return out;
}

CLI::App* AddLoadgenCommand(CLI::App& app, LoadgenOptions& o) {
  CLI::App* c = app.add_subcommand(
      "loadgen",
      "Measure every scheme's traffic against P: synthetic workers on the real servers and peer collectives");
  c->add_option("--mode", o.modes, "ps and/or decentralized (comma list)")->delimiter(',')->capture_default_str();
  c->add_option("--workers", o.workers, "Values of P, each in [1, 1024] (comma list)")
      ->delimiter(',')
      ->capture_default_str();
  c->add_option("--servers", o.servers, "Server shards S (ps: processes; decentralized: shard ranges)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  c->add_option("--schemes", o.schemes, "Comma list (default: all nine; gtopk_tree: gtopk with the peers' tree merge)")
      ->delimiter(',');
  CLI::Option* model = c->add_option("--model", o.model,
                                     "The job's model, whose layer table the gradients have: mlp, cnn, resnet or vgg")
                           ->capture_default_str();
  c->add_option("--params", o.params,
                "A flat layout of N parameters (one layer, job model custom) instead of --model: d from 1e3 to 2e8")
      ->excludes(model);
  c->add_option("--density", o.density, "k / d per shard")->capture_default_str()->check(CLI::Range(1e-6, 1.0));
  c->add_option("--rounds", o.rounds, "Timed rounds per configuration")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  c->add_option("--warmup-rounds", o.warmup_rounds, "Untimed rounds before them")->capture_default_str();
  c->add_option("--set", o.overrides, "Job spec override key=value (repeatable; scheme.<name>.* only for that scheme)");
  c->add_option("--gradients", o.gradients_dir, "Directory of grad-r*-w*.skgd dumps, cycled over the workers");
  c->add_option("--bin-dir", o.bin_dir, "Directory holding sketchps-server (default: next to this binary)");
  c->add_option("--correlation", o.correlation, "Synthetic gradients: correlation between workers")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  c->add_option("--seed", o.seed, "Synthetic gradients' seed")->capture_default_str();
  c->add_option("--epoch", o.epoch, "Epoch every round reports (past DGC's and SDAGC's warm-up by default)")
      ->capture_default_str();
  c->add_option("--timeout-seconds", o.timeout_seconds, "Per configuration, setup included")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_flag("--json", o.json, "Print the results as JSON (default: a table)");
  c->add_option("--out", o.out, "Write the results as JSON to this file");
  c->add_option("--work-dir", o.work_dir, "Job files and logs (default: a new directory in /tmp, removed on success)");
  c->add_flag("--calibrate", o.calibrate,
              "Print the union of 4 workers' top-k sets for the synthetic generator (and --gradients), no sweep");
  c->add_option("--single", o.single, "Internal: one configuration mode:scheme:P")->group("");
  c->add_option("--stream-bytes-per-second", o.stream_bytes_per_second, "Internal: the yardstick")->group("");
  return c;
}

int RunLoadgen(const LoadgenOptions& options) {
  BlockTerminationSignals();
  spdlog::set_level(spdlog::level::warn);
  if (!options.single.empty()) return RunSingle(options);
  if (options.calibrate) return RunCalibrate(options);
  if (absl::Status st = ValidateOptions(options); !st.ok()) {
    std::fprintf(stderr, "sketchps loadgen: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  return RunSweep(options);
}

}  // namespace sketchps::bench
