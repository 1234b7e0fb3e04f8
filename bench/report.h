// Rendering of benchmark results: a fixed-width table for people, JSON for scripts.
#pragma once

#include <string>
#include <vector>

#include "bench/primitives.h"
#include "nlohmann/json.hpp"

namespace sketchps::bench {

// One JSON object per result with the keys of BenchResult (method, d, density_target, ...,
// stream_pass_gbps), the rows "stream_pass", "sum_abs" and "stream_pass_device" included.
nlohmann::json ToJson(const std::vector<BenchResult>& results);

// A table with one row per method and d, times in milliseconds and per entry, and after the rows
// of each d a line with the stream pass's time and bandwidth.
std::string ToTable(const std::vector<BenchResult>& results);

}  // namespace sketchps::bench
