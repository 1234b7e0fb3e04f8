// summary.json of a run directory, from the workers' per-round metrics (worker/trainer.h lists the
// fields of each JSON line).
//
// Keys: scheme, model, workers, servers, density, rounds, epochs, final_test_accuracy (the
// reporting rank's last evaluation; null when none), wall_seconds, rounds_per_second, bytes_up_per_worker_per_round and
// bytes_down_per_worker_per_round (serialized gRPC bytes, mean over workers and rounds),
// raw_bytes_up_per_worker_per_round / raw_bytes_down_... (payload arrays only),
// dense_bytes_per_round (4 d), compression_ratio_up / _down (dense bytes over wire bytes),
// compute_seconds, compress_seconds, communicate_seconds (per worker: the mean over workers of
// each worker's total), final_weights_checksum (the reporting rank's, hex; every replica's is
// checked equal to the servers' every round), reporting_rank.
// The reporting rank is the lowest rank among those whose last record has the highest round: rank 0
// unless it was killed (a decentralized job goes on without it; its new rank 0 evaluates).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace sketchps::tools {

struct RunFacts {
  std::string scheme;
  std::string model;
  std::uint32_t workers = 0;
  std::uint32_t servers = 0;
  double density = 0;
  double rounds_per_epoch = 1;
  double wall_seconds = 0;      // the whole run, start to finish
  double train_seconds = 0;     // from the workers' start to the last worker's exit
};

// Reads one JSON object per line; errors name "<file>:<line>".
absl::StatusOr<std::vector<nlohmann::json>> ReadJsonLines(const std::string& path);

// The reporting rank of `metrics` (see above).
std::uint32_t ReportingRank(const std::vector<std::vector<nlohmann::json>>& metrics);

// metrics[r] holds rank r's records. InvalidArgument when a rank has no records or a record lacks a
// field (named).
absl::StatusOr<nlohmann::json> Summarize(const RunFacts& facts, const std::vector<std::vector<nlohmann::json>>& metrics);

}  // namespace sketchps::tools
