// Rendering of benchmark results: a fixed-width table for people, JSON for scripts.
#pragma once

#include <string>
#include <vector>

#include "bench/primitives.h"
#include "nlohmann/json.hpp"

namespace sketchps::bench {

// One JSON object per result with the keys of BenchResult (method, d, density_target, ...).
nlohmann::json ToJson(const std::vector<BenchResult>& results);

// A table with one row per method, times in milliseconds.
std::string ToTable(const std::vector<BenchResult>& results);

}  // namespace sketchps::bench
