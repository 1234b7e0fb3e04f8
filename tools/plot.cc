#include "tools/plot.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status.h"
#include "launch/child.h"
#include "tools/plot_script.h"
#include "tools/report.h"
#include "tools/summary.h"
#include "worker/recovery_figures.h"

namespace sketchps::tools {
namespace fs = std::filesystem;
namespace {

constexpr int kExitNoMatplotlib = 3;  // tools/plot_runs.py

std::string Python() {
  const char* env = std::getenv("SKETCHPS_PYTHON");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/python3";
}

std::string Label(const std::string& dir, const nlohmann::json& summary) {
  fs::path path = fs::path(dir).lexically_normal();
  if (path.filename().empty()) path = path.parent_path();  // "runs/a/"
  const std::string name = path.filename().string();
  return absl::StrCat(name, ": ", summary.value("scheme", "?"), ", ", summary.value("mode", "?"), ", ",
                      summary.value("workers", 0), " workers");
}

void AddRecoveryPoint(const nlohmann::json& record, nlohmann::json& recovery) {
  if (!record.contains("input_norm")) return;  // a dense, skipped or older record
  recovery["rounds"].push_back(record.value("round", 0.0) + 1);
  for (const char* figure : worker::kRecoveryFigures) {
    const auto it = record.find(figure);
    recovery[figure].push_back(it != record.end() && it->is_number() ? *it : nlohmann::json());
  }
}

nlohmann::json ToJson(const std::vector<PlotSeries>& runs) {
  nlohmann::json out{{"runs", nlohmann::json::array()}};
  for (const auto& r : runs) {
    out["runs"].push_back({{"label", r.label},
                           {"seconds", r.seconds},
                           {"rounds", r.rounds},
                           {"bytes", r.bytes},
                           {"accuracy", r.accuracy},
                           {"loss", {{"rounds", r.loss_rounds}, {"loss", r.loss}}},
                           {"recovery", r.recovery}});
  }
  return out;
}

// Runs plot_runs.py on `data` in a scratch folder; its output goes to a log there.
absl::Status RunScript(const nlohmann::json& data, const std::string& prefix) {
  const std::string python = Python();
  if (access(python.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("plots need python3 with matplotlib: ", python,
                                                      " is not executable (set SKETCHPS_PYTHON, or apt-get install "
                                                      "python3-matplotlib)"));
  }
  const fs::path scratch =
      fs::temp_directory_path() / absl::StrCat("sketchps-plot-", getpid(), "-", absl::ToUnixNanos(absl::Now()));
  std::error_code ec;
  fs::create_directories(scratch, ec);
  if (ec) return absl::InternalError(absl::StrCat(scratch.string(), ": ", ec.message()));
  std::ofstream(scratch / "plot_runs.py") << kPlotScript;
  std::ofstream(scratch / "data.json") << data.dump();
  auto child = launch::Child::Start(
      "plot", {python, (scratch / "plot_runs.py").string(), (scratch / "data.json").string(), prefix},
      (scratch / "plot.log").string());
  absl::Status status = child.status();
  if (child.ok()) {
    std::optional<int> code;
    while (!(code = child->Poll())) absl::SleepFor(absl::Milliseconds(20));
    if (*code == kExitNoMatplotlib) {
      status = absl::FailedPreconditionError(
          absl::StrCat("plots need matplotlib for ", python, ": ", child->LogTail(2), " (or set SKETCHPS_PYTHON)"));
    } else if (*code != 0) {
      status =
          absl::InternalError(absl::StrCat("the plot script failed (exit code ", *code, "):\n", child->LogTail(8)));
    }
  }
  fs::remove_all(scratch, ec);
  return status;
}

}  // namespace

absl::StatusOr<PlotSeries> LoadPlotSeries(const std::string& run_dir) {
  SKETCHPS_ASSIGN_OR_RETURN(const nlohmann::json summary, LoadSummary(run_dir));
  SKETCHPS_ASSIGN_OR_RETURN(const auto records, ReadJsonLines((fs::path(run_dir) / "metrics.jsonl").string()));
  PlotSeries s;
  s.label = Label(run_dir, summary);
  double bytes = 0;
  const double start = records.empty() ? 0.0 : records.front().value("round_start", 0.0);
  for (const auto& r : records) {
    bytes += WireBytes(r);
    AddRecoveryPoint(r, s.recovery);
    if (const auto loss = r.find("loss"); loss != r.end() && loss->is_number() && std::isfinite(loss->get<double>())) {
      s.loss_rounds.push_back(r.value("round", 0.0) + 1);
      s.loss.push_back(loss->get<double>());
    }
    if (!r.contains("test_accuracy") || !r["test_accuracy"].is_number()) continue;
    s.seconds.push_back(r.value("time", start) - start);
    s.rounds.push_back(r.value("round", 0.0) + 1);
    s.bytes.push_back(bytes);
    s.accuracy.push_back(r["test_accuracy"].get<double>());
  }
  return s;
}

absl::Status WritePlots(const std::vector<std::string>& run_dirs, const std::string& prefix,
                        const std::string& recovery_prefix) {
  std::vector<PlotSeries> runs;
  bool any = false;
  for (const auto& dir : run_dirs) {
    SKETCHPS_ASSIGN_OR_RETURN(PlotSeries s, LoadPlotSeries(dir));
    any |= !s.accuracy.empty() || !s.loss.empty();
    runs.push_back(std::move(s));
  }
  if (!any) {
    return absl::InvalidArgumentError(
        "--plot: no run has an evaluation or a training loss to plot (train.eval_every_rounds)");
  }
  const fs::path parent = fs::path(prefix).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--plot ", prefix, ": ", ec.message()));
  nlohmann::json data = ToJson(runs);
  if (!recovery_prefix.empty()) data["recovery_prefix"] = fs::absolute(recovery_prefix).string();
  return RunScript(data, fs::absolute(prefix).string());
}

}  // namespace sketchps::tools
