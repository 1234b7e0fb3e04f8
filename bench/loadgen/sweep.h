// The load generator's sweep: every configuration of SweepConfigs() in a child process
// (`sketchps loadgen --single mode:scheme:P`, bench/loadgen/single.h) with a deadline, one after
// another, and the results as one JSON document:
//
//   {"generator", "version", "date", "machine", "load_average_start", "load_average_end", "job",
//    "options", "stream": {the yardstick}, "sweep_seconds", "results": [...], "failures": [...]}
//
// Each child works in <work-dir>/<mode>-<scheme>-p<P> (job.yaml, logs, port files, result.json);
// its stderr (progress, every round) is forwarded to this process's stderr as it comes. A child
// that fails or times out becomes an entry of "failures" with its error and log, and the sweep goes
// on. A child that does not stop within 180 s of its own deadline is killed, and so are the servers
// it listed in server.pids. SIGINT/SIGTERM/SIGHUP (blocked, common/config/cli.h) stop the running child
// and end the sweep with what was measured.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "bench/loadgen/loadgen.h"

namespace sketchps::bench {

// Runs the sweep of validated options (ValidateOptions). Exit code as RunLoadgen's.
int RunSweep(const LoadgenOptions& options);

// The results as a text table (one row per result: wire and raw bytes per worker per round, the
// busiest server link, rounds per second).
std::string ResultsTable(const nlohmann::json& results);

}  // namespace sketchps::bench
