// From counter snapshots to a Measurement (bench/loadgen/figures.h): the load generator reads every
// worker's counters, and the servers' /metrics, at the barrier after the warm-up rounds and after
// the last round; a Measurement holds the differences.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/loadgen/counting_aggregator.h"
#include "bench/loadgen/figures.h"
#include "engine/transport.h"

namespace sketchps::bench {

// One worker's counters at one barrier.
struct WorkerSnapshot {
  TransportCounters transport;  // wire bytes; raw bytes when transport.counts_raw
  PhaseSlots phases;            // the scheme's payloads and results (CountingAggregator)
};

// One worker over the timed rounds.
struct WorkerWindow {
  WorkerSnapshot start, end;
  std::uint64_t selected = 0;  // entries the worker selected in the timed rounds (ReplicaRound::selected)
};

// The configuration's identity and timing; Assemble() fills in the byte counts.
struct MeasurementHeader {
  std::string mode, scheme;
  std::uint32_t workers = 0;
  std::uint32_t shards = 0;
  std::uint64_t dim = 0;
  double density = 0;
  std::uint64_t rounds = 0;
  std::vector<double> round_seconds;  // one per timed round
  double stream_bytes_per_second = 0;
};

// The phases a round used: one more than the highest phase with traffic in any window's end.
std::uint32_t PhasesUsed(const std::vector<WorkerWindow>& workers);

// Counter deltas end - start. Raw bytes: the transport's when it counts them (decentralized), else
// the scheme's payloads and results. `servers_start`/`servers_end`: per shard (empty when there
// are no servers; pairs beyond the shorter list are ignored).
Measurement Assemble(const MeasurementHeader& header, const std::vector<WorkerWindow>& workers,
                     const std::vector<ServerTotals>& servers_start, const std::vector<ServerTotals>& servers_end);

}  // namespace sketchps::bench
