// `sketchps report RUN_DIR...`: one markdown table row per run directory (its summary.json), for
// comparing methods (docs/reports/results.md is made with it). Rows keep the given order; each names its
// scheme, its mode (ps or decentralized) and its workers / servers ("4 / 2"; "4 / -" in
// decentralized mode; "4→3 / -" when a regroup left fewer workers), so runs that differ only in
// mode are told apart. A directory without a readable summary.json is an error naming it; a key
// missing from an older summary shows as "-".
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace sketchps::tools {

// <dir>/summary.json as an object. NotFound / InvalidArgument naming the file.
absl::StatusOr<nlohmann::json> LoadSummary(const std::string& dir);

absl::StatusOr<std::string> MarkdownReport(const std::vector<std::string>& run_dirs);

}  // namespace sketchps::tools
