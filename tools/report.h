// `sketchps report RUN_DIR...`: one markdown table row per run directory (its summary.json), for
// comparing methods (docs/results.md is made with it). Rows keep the given order; a directory without
// a readable summary.json is an error naming it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sketchps::tools {

absl::StatusOr<std::string> MarkdownReport(const std::vector<std::string>& run_dirs);

}  // namespace sketchps::tools
