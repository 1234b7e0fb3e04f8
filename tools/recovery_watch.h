// The recovery watch: a compression method whose residual keeps growing, read after the run from the
// workers' round records (worker/trainer.h: `residual_norm`, the L2 norm of what the method kept back
// after the round; dense runs have none).
//
// Under error feedback, a compressor that returns enough of its input keeps the residual bounded: it
// rises over the first rounds and then levels off or falls (topk on the CNN at density 0.001 holds
// about 14 from round 30 on). When the recovery returns too little, the residual keeps growing and
// training stalls: gs_sgd with 8k candidates at that density grew from 4 to 260 and ended at 10%
// (docs/reports/results.md "The recovery, observed"). So, for every rank, the watch compares the mean
// residual norm over the last tenth of its rounds with the mean over the tenth just before its
// half-way round. A ratio above kResidualGrowthLimit, or a non-finite norm anywhere in the second
// half, is reported; the measured runs that held accuracy stayed at 0.7-1.1, the diverging ones at 2
// and beyond 1e20. A heuristic: it sees divergence, not a slow loss of accuracy. Ranks with fewer
// than kMinWatchedRounds records carrying the norm get no verdict.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sketchps::tools {

inline constexpr double kResidualGrowthLimit = 1.5;
inline constexpr std::size_t kMinWatchedRounds = 20;

struct ResidualGrowth {
  std::uint32_t rank = 0;
  std::uint64_t middle_first = 0, middle_last = 0;  // rounds of the window before the half-way round
  std::uint64_t end_first = 0, end_last = 0;        // rounds of the last tenth
  double middle_norm = 0;                           // mean residual norm over the middle window
  double end_norm = 0;                              // ... over the last tenth; +inf when a norm is not finite
  double ratio() const { return middle_norm > 0 ? end_norm / middle_norm : end_norm; }
};

// metrics[r] holds rank r's records. A record without `residual_norm` is skipped; a null one counts
// as not finite (JSON writes non-finite numbers as null). The rank whose growth is largest, or
// nullopt when no rank passes the limit.
std::optional<ResidualGrowth> FindResidualGrowth(const std::vector<std::vector<nlohmann::json>>& metrics);

// One line for the run's output and summary: the rank, both windows, both norms, and what to change.
std::string DescribeResidualGrowth(const ResidualGrowth& growth);

// summary.json's "residual_growth": null, or {rank, middle_rounds, end_rounds ([first, last]),
// middle_norm, end_norm, ratio (null when not finite), message}.
nlohmann::json ResidualGrowthJson(const std::optional<ResidualGrowth>& growth);

// The recovery floor of the sketch methods (schemes/recovery_floor.h), read from the workers' round
// records: a record's `floor_not_held` (engine/scheme.h RoundDiagnostics) counts the shards on which a
// window ended that round with the returned mass grown at the budget's most candidates, and
// `floor_growth` is the largest such growth. Each verdict is also a line of the worker's log
// (kFloorNotHeldTag), which no tool reads.
struct FloorNotHeld {
  std::uint32_t rank = 0;
  std::uint64_t lines = 0;   // verdicts in that rank's records (one per shard and window, as its log's lines)
  std::uint64_t round = 0;   // the first record with one
  std::uint32_t shards = 0;  // its floor_not_held
  double growth = 0;         // its floor_growth
};

// metrics[r] holds rank r's records. The first rank whose records carry a verdict, or nullopt.
std::optional<FloorNotHeld> FindFloorNotHeld(const std::vector<std::vector<nlohmann::json>>& metrics);

// summary.json's "recovery_floor": null, or {rank, lines, round, message}; the message says when the
// floor was not held and names `scheme`'s keys to change.
nlohmann::json FloorNotHeldJson(const std::optional<FloorNotHeld>& floor, const std::string& scheme);

}  // namespace sketchps::tools
