// Prometheus metrics of one worker (prometheus-cpp), fed with the worker's per-round records
// (worker/trainer.h lists their fields) and served with `sketchps-worker --metrics-listen`.
//
// Families (all labelled rank="<rank>"):
//   sketchps_worker_rounds_total                   counter  rounds completed (a rolled-back round
//                                                           that is run again counts again)
//   sketchps_worker_round                          gauge    the last completed round (0-based)
//   sketchps_worker_workers                        gauge    workers in that round (P; fewer after a regroup)
//   sketchps_worker_wire_bytes_total{direction}    counter  serialized messages sent (up) and received (down)
//   sketchps_worker_payload_bytes_total{direction} counter  the payload arrays alone
//   sketchps_worker_dense_bytes_total              counter  what dense SGD would send each way (4 d per round)
//   sketchps_worker_compression_ratio{direction}   gauge    dense bytes over wire bytes, cumulative
//   sketchps_worker_phase_seconds_total{phase}     counter  compute | exchange | compress | communicate |
//                                                           evaluate (the record's *_s fields)
//   sketchps_worker_round_seconds                  histogram per round: compute start to exchange end
//   sketchps_worker_loss                           gauge    training loss of the last round
//   sketchps_worker_test_accuracy                  gauge    the last evaluation's accuracy
//   sketchps_worker_skipped_rounds_total           counter  rounds whose gradient was skipped (not finite)
//   sketchps_worker_recovery{figure}               gauge    the last compressed round's input_norm,
//                                                           residual_norm, sent_share and, with
//                                                           scheme.diagnostics, recovered_share, best_share,
//                                                           hit_rate, candidate_hit_rate (metrics.jsonl)
// /metrics also serves sketchps_build_info{role="worker"} and the process families
// (common/net/metrics_http.h). A record that lacks a field leaves that family unchanged.
// Thread-safe (prometheus-cpp metrics are).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"
#include "common/net/metrics_http.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
}  // namespace prometheus

namespace sketchps::worker {

class WorkerMetrics {
 public:
  explicit WorkerMetrics(std::uint32_t rank);
  ~WorkerMetrics();

  // One round's record, as written to --metrics-out.
  void ObserveRound(const nlohmann::json& record);

  // The exposition text of the worker families (without the standard ones).
  std::string Text() const;
  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

 private:
  struct Families;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> f_;
};

// Serves `metrics`, the build and the process families at http://<address>/metrics until the
// endpoint is destroyed. Unavailable naming --metrics-listen when it cannot bind.
absl::StatusOr<MetricsEndpoint> ServeWorkerMetrics(const std::string& address, const WorkerMetrics& metrics);

}  // namespace sketchps::worker
