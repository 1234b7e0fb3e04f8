// Plots of test accuracy against wall time, against rounds and against cumulative bytes (drawn in
// MB), and of the training loss against rounds, for one run
// directory or several side by side: `sketchps report --plot PREFIX RUN_DIR...`, and `sketchps run`
// into its run directory (accuracy.png, accuracy.svg).
//
// The series of a run directory come from its metrics.jsonl (the reporting rank's records,
// tools/run.h) and summary.json (the label). One point per record that carries test_accuracy:
//   seconds   the record's time minus the first record's round_start: wall time since training began
//   rounds    round + 1, the rounds completed
//   bytes     the sum of WireBytes (tools/summary.h) over the records up to this one: what this
//             worker sent and received so far
//   accuracy  test_accuracy, in [0, 1]
// and one loss point per record that carries a finite loss: loss_rounds (round + 1) and loss (the
// training loss this worker recorded for its batch).
// The label is "<directory name>: <scheme>, <mode>, <workers> workers".
// The recovery series (docs/methods.md "Recovery diagnostics"): one point per compressed record,
// rounds and the record's input_norm, residual_norm, sent_share, recovered_share, best_share,
// hit_rate, candidate_hit_rate (null where a record lacks one).
//
// Drawing is tools/plot_runs.py, embedded in the binary, run by python3 with matplotlib: the
// interpreter is $SKETCHPS_PYTHON, else /usr/bin/python3 (Debian's python3-matplotlib).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace sketchps::tools {

struct PlotSeries {
  std::string label;
  std::vector<double> seconds, rounds, bytes, accuracy;
  std::vector<double> loss_rounds, loss;
  nlohmann::json recovery = nlohmann::json::object();  // {"rounds": [..], "<figure>": [..], ...}
};

// NotFound / InvalidArgument naming the file when metrics.jsonl or summary.json cannot be read.
// A run without any evaluation gives empty series.
absl::StatusOr<PlotSeries> LoadPlotSeries(const std::string& run_dir);

// Writes <prefix>.png and <prefix>.svg, and <recovery_prefix>.png/.svg (residual norms, recovered
// shares and hit rates against rounds) when recovery_prefix is set and a run has compressed rounds.
// InvalidArgument when no run has an evaluation;
// FailedPrecondition naming the interpreter when python3 or matplotlib is missing; Internal with
// the script's last lines when it fails otherwise.
absl::Status WritePlots(const std::vector<std::string>& run_dirs, const std::string& prefix,
                        const std::string& recovery_prefix = "");

}  // namespace sketchps::tools
