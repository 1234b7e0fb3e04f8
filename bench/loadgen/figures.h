// The load generator's measurements and the figures derived from them (bench/loadgen/loadgen.h).
//
// A Measurement holds counter deltas over the timed rounds of one configuration (mode, scheme, P):
// per worker the transport's wire and raw bytes and the scheme's payload bytes, per shard and phase
// the payload bytes the workers contributed, per server shard the bytes its /metrics counted. Derive()
// turns them into per-round figures:
//
//   bytes per worker per round     (wire or raw, up or down) = mean over workers of delta / rounds
//   server ingress/egress          per shard per round = delta of sketchps_bytes_{in,out}_total / rounds
//   busiest server link            max over shards of max(ingress, egress) per round
//   rounds per second              rounds / seconds (seconds: the timed rounds' wall time)
//   merges per second per shard    contributions the shard reduced (payloads, every phase) / seconds
//   reduce read bytes/s per shard  raw payload bytes the shard's reductions read (every worker, every
//                                  phase) / seconds; compared with a streaming pass's bytes/s
//
// Raw bytes are RawPayloadBytes (u32 indices, f32 values: the size each method's formula is stated
// in); wire bytes are serialized messages (delta-varint indices, f16 tables where exact, headers).
// In decentralized mode the transport's raw bytes are the partial states the collectives moved
// (a worker forwards others' payloads), the scheme's payload bytes only its own contributions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace sketchps::bench {

struct WorkerTotals {
  std::uint64_t wire_up = 0, wire_down = 0;        // serialized messages
  std::uint64_t raw_up = 0, raw_down = 0;          // transport raw bytes (decentralized), else = payload
  std::uint64_t payload_up = 0, payload_down = 0;  // the scheme's contributions and the results it received
  std::uint64_t selected = 0;                      // entries selected (Scheme::selected), summed over shards
};

struct PhaseTotals {
  std::uint64_t payload_bytes = 0;  // raw bytes of the workers' contributions, summed over workers
  std::uint64_t result_bytes = 0;   // raw bytes of the results the workers received, summed
  std::uint64_t contributions = 0;  // payloads (workers that contributed)
};

struct ServerTotals {
  double bytes_in = 0, bytes_out = 0;  // sketchps_bytes_in_total / _out_total deltas
};

struct Measurement {
  std::string mode;    // "ps" | "decentralized"
  std::string scheme;  // e.g. "gs_sgd", "gtopk_tree"
  std::uint32_t workers = 0;
  std::uint32_t servers = 0;  // shards (ps: server processes)
  std::uint64_t dim = 0;
  double density = 0;
  std::uint64_t rounds = 0;  // timed rounds
  double seconds = 0;        // their wall time (sum of the rounds' barrier-to-barrier times)
  std::vector<double> round_seconds;
  std::vector<WorkerTotals> workers_totals;            // per worker
  std::vector<std::vector<PhaseTotals>> shard_phases;  // [shard][phase]
  std::vector<ServerTotals> server_totals;             // ps: per shard; empty otherwise
  double stream_bytes_per_second = 0;                  // the yardstick, 0 when not measured
};

// Per-round figures of one configuration (see the header comment). Byte figures are means over
// workers; *_min / *_max the extremes over workers.
struct Figures {
  double wire_up = 0, wire_down = 0, raw_up = 0, raw_down = 0, payload_up = 0, payload_down = 0;
  double wire_up_min = 0, wire_up_max = 0, wire_down_min = 0, wire_down_max = 0;
  double selected = 0;
  std::vector<double> server_in, server_out;  // per shard per round (ps)
  double busiest_link = 0;                    // ps: max over shards and directions, per round
  double rounds_per_second = 0;
  double round_seconds_median = 0;
  std::uint32_t phases = 0;                                       // phases per round (max over shards)
  std::vector<double> merges_per_second;                          // per shard
  std::vector<double> reduce_read_bytes_per_second;               // per shard
  std::vector<double> reduce_read_fraction_of_stream;             // per shard: the above / stream_bytes_per_second
  std::vector<std::vector<double>> payload_per_worker_per_phase;  // [shard][phase], raw bytes
};

// Pure functions of their arguments. Errors: InvalidArgument when rounds, seconds or workers are 0,
// or the per-worker data is missing.
absl::StatusOr<Figures> Derive(const Measurement& m);

// The measurement and its figures as one JSON record (the loadgen's results[] entries).
nlohmann::json ToJson(const Measurement& m, const Figures& f);

}  // namespace sketchps::bench
