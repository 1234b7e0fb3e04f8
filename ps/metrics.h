// Prometheus metrics of one parameter-server shard (prometheus-cpp), served as text at /metrics.
//
// Families (all labelled shard="<id>"):
//   sketchps_rounds_applied                 gauge      rounds in the master copy
//   sketchps_bytes_in_total / _out_total    counters   serialized PushPull request / response bytes
//   sketchps_pushes_total{outcome}          counter    accepted | duplicate | rejected
//   sketchps_phase_wait_seconds             histogram  per PushPull: arrival to result
//   sketchps_straggler_wait_seconds         histogram  per phase: first contribution to the last
//   sketchps_rounds_refused_total           counter    rounds whose sum or update was not finite
//   sketchps_workers_left_out_total         counter    workers a round deadline left out, per phase closed
//   sketchps_checkpoints_total{outcome}     counter    written | failed
//   sketchps_checkpoint_seconds             histogram  time to write (incl. fsync) one checkpoint
// /metrics also serves sketchps_build_info{role="server"} and the process families
// (common/net/metrics_http.h). Thread-safe (prometheus-cpp metrics are).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/net/metrics_http.h"

namespace prometheus {
class Counter;
class Exposer;
class Gauge;
class Histogram;
class Registry;
}  // namespace prometheus

namespace sketchps::ps {

using sketchps::MetricsEndpoint;

class ServerMetrics {
 public:
  explicit ServerMetrics(std::uint32_t shard);
  ~ServerMetrics();

  void SetRoundsApplied(std::uint64_t rounds);
  void CountRefusedRound();
  void CountLeftOut(std::uint64_t workers);
  void AddBytes(std::uint64_t in, std::uint64_t out);
  enum class Push { kAccepted, kDuplicate, kRejected };
  void CountPush(Push outcome);
  void ObservePhaseWait(double seconds);
  void ObserveStragglerWait(double seconds);
  void CountCheckpoint(bool ok, double seconds);

  // The exposition text of every family (what /metrics serves).
  std::string Text() const;
  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge* rounds_;
  prometheus::Counter* refused_;
  prometheus::Counter* left_out_;
  prometheus::Counter* bytes_in_;
  prometheus::Counter* bytes_out_;
  prometheus::Counter* accepted_;
  prometheus::Counter* duplicate_;
  prometheus::Counter* rejected_;
  prometheus::Histogram* phase_wait_;
  prometheus::Histogram* straggler_wait_;
  prometheus::Counter* checkpoints_ok_;
  prometheus::Counter* checkpoints_failed_;
  prometheus::Histogram* checkpoint_seconds_;
};

// Serves `metrics`, the build and the process families at http://<address>/metrics ("host:port";
// port 0 picks a free one) until the endpoint is destroyed. Unavailable naming --metrics-listen when
// it cannot bind.
absl::StatusOr<MetricsEndpoint> ServeMetrics(const std::string& address, const ServerMetrics& metrics);

}  // namespace sketchps::ps
