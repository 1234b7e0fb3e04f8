#include "bench/loadgen/figures.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace sketchps::bench {

absl::StatusOr<Figures> Derive(const Measurement& m) {
  if (m.rounds == 0) return absl::InvalidArgumentError("measurement: no timed rounds");
  if (m.seconds <= 0) return absl::InvalidArgumentError("measurement: no time measured");
  if (m.workers == 0 || m.workers_totals.size() != m.workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("measurement: ", m.workers_totals.size(), " worker totals for ", m.workers, " workers"));
  }
  Figures f;
  const double r = static_cast<double>(m.rounds);
  const double p = static_cast<double>(m.workers);
  f.wire_up_min = f.wire_down_min = 1e300;
  for (const auto& w : m.workers_totals) {
    f.wire_up += static_cast<double>(w.wire_up) / r / p;
    f.wire_down += static_cast<double>(w.wire_down) / r / p;
    f.raw_up += static_cast<double>(w.raw_up) / r / p;
    f.raw_down += static_cast<double>(w.raw_down) / r / p;
    f.payload_up += static_cast<double>(w.payload_up) / r / p;
    f.payload_down += static_cast<double>(w.payload_down) / r / p;
    f.selected += static_cast<double>(w.selected) / r / p;
    f.wire_up_min = std::min(f.wire_up_min, static_cast<double>(w.wire_up) / r);
    f.wire_up_max = std::max(f.wire_up_max, static_cast<double>(w.wire_up) / r);
    f.wire_down_min = std::min(f.wire_down_min, static_cast<double>(w.wire_down) / r);
    f.wire_down_max = std::max(f.wire_down_max, static_cast<double>(w.wire_down) / r);
  }
  for (const auto& s : m.server_totals) {
    f.server_in.push_back(s.bytes_in / r);
    f.server_out.push_back(s.bytes_out / r);
    f.busiest_link = std::max({f.busiest_link, s.bytes_in / r, s.bytes_out / r});
  }
  f.rounds_per_second = r / m.seconds;
  if (!m.round_seconds.empty()) {
    std::vector<double> sorted = m.round_seconds;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t n = sorted.size();
    f.round_seconds_median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  }
  for (const auto& phases : m.shard_phases) {
    f.phases = std::max<std::uint32_t>(f.phases, static_cast<std::uint32_t>(phases.size()));
    double merges = 0, read = 0;
    std::vector<double> per_phase;
    for (const auto& ph : phases) {
      merges += static_cast<double>(ph.contributions);
      read += static_cast<double>(ph.payload_bytes);
      per_phase.push_back(static_cast<double>(ph.payload_bytes) / r / p);
    }
    f.merges_per_second.push_back(merges / m.seconds);
    f.reduce_read_bytes_per_second.push_back(read / m.seconds);
    f.reduce_read_fraction_of_stream.push_back(
        m.stream_bytes_per_second > 0 ? read / m.seconds / m.stream_bytes_per_second : 0.0);
    f.payload_per_worker_per_phase.push_back(std::move(per_phase));
  }
  return f;
}

nlohmann::json ToJson(const Measurement& m, const Figures& f) {
  nlohmann::json shards = nlohmann::json::array();
  for (std::size_t s = 0; s < m.shard_phases.size(); ++s) {
    nlohmann::json phases = nlohmann::json::array();
    for (std::size_t ph = 0; ph < m.shard_phases[s].size(); ++ph) {
      const auto& t = m.shard_phases[s][ph];
      phases.push_back(
          {{"payload_bytes_per_worker_per_round", f.payload_per_worker_per_phase[s][ph]},
           {"result_bytes_per_worker_per_round",
            static_cast<double>(t.result_bytes) / static_cast<double>(m.rounds) / m.workers},
           {"contributions_per_round", static_cast<double>(t.contributions) / static_cast<double>(m.rounds)}});
    }
    nlohmann::json shard{{"shard", s},
                         {"phases", phases},
                         {"merges_per_second", f.merges_per_second[s]},
                         {"reduce_read_bytes_per_second", f.reduce_read_bytes_per_second[s]},
                         {"reduce_read_fraction_of_stream", f.reduce_read_fraction_of_stream[s]}};
    if (s < f.server_in.size()) {
      shard["server_in_bytes_per_round"] = f.server_in[s];
      shard["server_out_bytes_per_round"] = f.server_out[s];
    }
    shards.push_back(std::move(shard));
  }
  return nlohmann::json{{"mode", m.mode},
                        {"scheme", m.scheme},
                        {"workers", m.workers},
                        {"servers", m.servers},
                        {"dim", m.dim},
                        {"density", m.density},
                        {"rounds", m.rounds},
                        {"seconds", m.seconds},
                        {"round_seconds", m.round_seconds},
                        {"per_worker_per_round",
                         {{"wire_up", f.wire_up},
                          {"wire_down", f.wire_down},
                          {"wire_total", f.wire_up + f.wire_down},
                          {"raw_up", f.raw_up},
                          {"raw_down", f.raw_down},
                          {"raw_total", f.raw_up + f.raw_down},
                          {"payload_up", f.payload_up},
                          {"payload_down", f.payload_down},
                          {"wire_up_min", f.wire_up_min},
                          {"wire_up_max", f.wire_up_max},
                          {"wire_down_min", f.wire_down_min},
                          {"wire_down_max", f.wire_down_max},
                          {"selected", f.selected}}},
                        {"busiest_server_link_bytes_per_round", f.busiest_link},
                        {"rounds_per_second", f.rounds_per_second},
                        {"round_seconds_median", f.round_seconds_median},
                        {"phases", f.phases},
                        {"stream_bytes_per_second", m.stream_bytes_per_second},
                        {"shards", shards}};
}

}  // namespace sketchps::bench
