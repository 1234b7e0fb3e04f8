// One configuration (mode, scheme, P) of the load generator, run in this process: P synthetic
// workers against S real `sketchps-server` processes (ps) or P in-process Peer services
// (decentralized), every round through the schemes' real worker code (Replica::RunRound).
//
// Rounds are lock-stepped: every worker draws its gradient (synthetic, bench/loadgen/synth.h, or
// real dumps, bench/loadgen/gradient_dumps.h), the workers meet at a barrier, run the round, check
// their replica against the shards' checksums (ps), meet again. A round's time runs from barrier to
// barrier, so gradient generation is not timed. Counters are read at the barrier after the warm-up
// rounds and after the last one (bench/loadgen/collect.h). After the last round every worker leaves
// the job and the servers must exit 0 by themselves, as they do at the end of a real job.
//
// Blocking; uses spec.workers + 1 threads of its own (plus gRPC's). Not reentrant in one process
// only because of OpenMP's per-thread settings, which it sets to one thread per worker.
#pragma once

#include "absl/status/statusor.h"
#include "bench/loadgen/config.h"
#include "bench/loadgen/figures.h"

namespace sketchps::bench {

// Runs the configuration and returns its counters. Errors:
//   InvalidArgument    a bad configuration (ConfigJob's errors; dumps whose layers are not the model's);
//   DeadlineExceeded   spec.timeout_seconds passed: the rounds stop at the next round boundary
//                      (servers still busy a minute later are stopped);
//   Cancelled          SIGINT/SIGTERM/SIGHUP arrived (they must be blocked, common/config/cli.h), or the
//                      process that started this one exited;
//   otherwise          the first worker's or server's failure, naming it.
// Servers it started are gone when it returns, whatever the outcome.
absl::StatusOr<Measurement> RunConfiguration(const ConfigSpec& spec);

}  // namespace sketchps::bench
