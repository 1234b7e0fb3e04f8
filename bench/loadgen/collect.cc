#include "bench/loadgen/collect.h"

#include <algorithm>

namespace sketchps::bench {
namespace {

PhaseTotals Minus(const PhaseTotals& b, const PhaseTotals& a) {
  return PhaseTotals{b.payload_bytes - a.payload_bytes, b.result_bytes - a.result_bytes,
                     b.contributions - a.contributions};
}

// One worker's totals; adds its per-phase deltas to `shard_phases`.
WorkerTotals WorkerDelta(const WorkerWindow& w, std::vector<std::vector<PhaseTotals>>& shard_phases) {
  WorkerTotals t;
  t.wire_up = w.end.transport.wire_up - w.start.transport.wire_up;
  t.wire_down = w.end.transport.wire_down - w.start.transport.wire_down;
  for (std::size_t s = 0; s < shard_phases.size() && s < w.end.phases.size(); ++s) {
    for (std::size_t ph = 0; ph < shard_phases[s].size(); ++ph) {
      const PhaseTotals d = Minus(w.end.phases[s][ph], w.start.phases[s][ph]);
      PhaseTotals& acc = shard_phases[s][ph];
      acc.payload_bytes += d.payload_bytes;
      acc.result_bytes += d.result_bytes;
      acc.contributions += d.contributions;
      t.payload_up += d.payload_bytes;
      t.payload_down += d.result_bytes;
    }
  }
  const bool raw = w.end.transport.counts_raw;
  t.raw_up = raw ? w.end.transport.raw_up - w.start.transport.raw_up : t.payload_up;
  t.raw_down = raw ? w.end.transport.raw_down - w.start.transport.raw_down : t.payload_down;
  t.selected = w.selected;
  return t;
}

}  // namespace

std::uint32_t PhasesUsed(const std::vector<WorkerWindow>& workers) {
  std::uint32_t phases = 0;
  for (const auto& w : workers) {
    for (const auto& shard : w.end.phases) {
      for (std::uint32_t ph = 0; ph < kPhaseSlots; ++ph) {
        if (shard[ph].contributions > 0 || shard[ph].result_bytes > 0) phases = std::max(phases, ph + 1);
      }
    }
  }
  return phases;
}

Measurement Assemble(const MeasurementHeader& h, const std::vector<WorkerWindow>& workers,
                     const std::vector<ServerTotals>& servers_start, const std::vector<ServerTotals>& servers_end) {
  Measurement m;
  m.mode = h.mode;
  m.scheme = h.scheme;
  m.workers = h.workers;
  m.servers = h.shards;
  m.dim = h.dim;
  m.density = h.density;
  m.rounds = h.rounds;
  m.round_seconds = h.round_seconds;
  for (double s : h.round_seconds) m.seconds += s;
  m.stream_bytes_per_second = h.stream_bytes_per_second;
  m.shard_phases.assign(h.shards, std::vector<PhaseTotals>(PhasesUsed(workers)));
  for (const auto& w : workers) m.workers_totals.push_back(WorkerDelta(w, m.shard_phases));
  for (std::size_t s = 0; s < servers_start.size() && s < servers_end.size(); ++s) {
    m.server_totals.push_back(ServerTotals{servers_end[s].bytes_in - servers_start[s].bytes_in,
                                           servers_end[s].bytes_out - servers_start[s].bytes_out});
  }
  return m;
}

}  // namespace sketchps::bench
