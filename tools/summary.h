// summary.json of a run directory, from the workers' per-round metrics (worker/trainer.h lists the
// fields of each JSON line).
//
// Keys:
//   job_id, mode ("ps" or "decentralized"), version (of sketchps), scheme, model, workers,
//   servers (0 in decentralized mode: there are none), density, optimizer (optimizer.name),
//   learning_rate (optimizer.lr, the base rate), momentum (both "external" when the optimizer is:
//   the script's torch optimizer applied the update with its own settings and schedule),
//   batch_size (per worker), peer (decentralized mode only: timeout_seconds, on_failure);
//   planned_rounds (the job's total rounds; a run whose workers stopped before it failed);
//   rounds, epochs, workers_at_end (the reporting rank's last round; fewer than workers after a
//   regroup), final_test_accuracy (the reporting rank's last evaluation; null when none),
//   evaluations (how many of its records carry one), wall_seconds, rounds_per_second;
//   bytes_up_per_worker_per_round and bytes_down_per_worker_per_round (serialized gRPC bytes, mean
//   over every worker's rounds: Traffic below), raw_bytes_up_per_worker_per_round / raw_bytes_down_...
//   (payload arrays only), dense_bytes_per_round (4 d), compression_ratio_up / _down (dense bytes
//   over wire bytes); compression_ratio_up_second_half / _down_second_half (the same over the records
//   of rounds >= rounds / 2: the steady state, past the warm-ups, which papers quote);
//   compute_seconds, compress_seconds, communicate_seconds (per worker: the mean over workers of
//   each worker's total);
//   final_weights_checksum (the reporting rank's, hex; every replica's is checked equal to the
//   servers' every round), reporting_rank;
//   faults: faults.json of the run (tools/run.h: kills and the first failure), {} when none;
//   residual_growth: null, or the rank whose compression residual kept growing (a diverging
//   method; tools/recovery_watch.h);
//   rounds_skipped: per rank, the rounds it sat out for a non-finite gradient (records' "skipped");
//   rounds_left_out, rounds_caught_up: per rank, the rounds a round deadline closed without it and
//   those it then fetched without computing (ps.round_deadline_seconds; all 0 without one);
//   recovery_floor: null, or the first rank whose round records say the sketch methods' recovery floor
//   was not held within scheme.<method>.budget_factor (records' floor_not_held; tools/recovery_watch.h
//   FindFloorNotHeld);
//   membership (elastic jobs only, ps.elastic): the members over time, from the records' "members":
//   [{round, workers, members: [slots]}, ...], one entry per change, the first at the first round;
//   date (when the run finished, UTC, ISO 8601) and machine (CPU model and core count: ThisMachine()),
//   so that tables and figures drawn from summaries alone can say where and when they were measured.
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
  std::uint32_t servers = 0;  // 0 in decentralized mode
  double density = 0;
  double rounds_per_epoch = 1;
  double wall_seconds = 0;   // the whole run, start to finish
  double train_seconds = 0;  // from the workers' start to the last worker's exit
  std::string job_id;
  std::string mode = "ps";
  std::string optimizer = "sgd";  // optimizer.name; "external": learning_rate and momentum are the script's
  double learning_rate = 0;
  double momentum = 0;
  std::uint64_t planned_rounds = 0;  // the job's total rounds (0: not reported)
  std::uint32_t batch_size = 0;
  nlohmann::json peer = nullptr;                     // decentralized mode: {timeout_seconds, on_failure}
  nlohmann::json faults = nlohmann::json::object();  // faults.json
  std::string date;                                  // UtcNow() at the end of the run
  std::string machine;                               // ThisMachine()
};

// "2026-11-25T10:11:12Z".
std::string UtcNow();
// "<CPU model> (<n> cores)" from /proc/cpuinfo and the cores this process may use; "unknown CPU" when
// /proc/cpuinfo names none.
std::string ThisMachine();

// Reads one JSON object per line; errors name "<file>:<line>". A last line without its newline that
// does not parse (a writer stopped in the middle of a record) is left out.
absl::StatusOr<std::vector<nlohmann::json>> ReadJsonLines(const std::string& path);

// "" when no rank's record is "skipped" (a round sat out for a non-finite gradient); else, per such
// rank, how many and the first: "worker 1 sat out 3 rounds (the first round 5), ... for a non-finite
// gradient ...". `sketchps run` prints it as a warning.
std::string DescribeSkippedRounds(const std::vector<std::vector<nlohmann::json>>& metrics);

// The reporting rank of `metrics` (see above).
std::uint32_t ReportingRank(const std::vector<std::vector<nlohmann::json>>& metrics);
// The "membership" entry above (an empty array when no record has "members").
nlohmann::json MembershipOverTime(const std::vector<std::vector<nlohmann::json>>& metrics);

// The one definition of a run's traffic: the sums over every rank's records of bytes_up, bytes_down
// (serialized messages) and payload_up, payload_down (payload arrays), divided by the number of
// records (worker-rounds). summary.json, `sketchps compare` and the plots use it.
struct Traffic {
  double wire_up = 0, wire_down = 0, raw_up = 0, raw_down = 0;
  double worker_rounds = 0;
};
// metrics[r] holds rank r's records. InvalidArgument when a record lacks a field (named), or when
// there is no record at all.
absl::StatusOr<Traffic> TrafficPerWorkerPerRound(const std::vector<std::vector<nlohmann::json>>& metrics);
// The bytes one record says its worker sent and received: bytes_up + bytes_down (0 when absent).
double WireBytes(const nlohmann::json& record);

// metrics[r] holds rank r's records. InvalidArgument when a rank has no records or a record lacks a
// field (named).
absl::StatusOr<nlohmann::json> Summarize(const RunFacts& facts,
                                         const std::vector<std::vector<nlohmann::json>>& metrics);

}  // namespace sketchps::tools
