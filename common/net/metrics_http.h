// Prometheus pieces every sketchps daemon shares (prometheus-cpp): the standard families and the
// HTTP endpoint that serves /metrics.
//
// StandardMetrics(role) is a collectable with
//   sketchps_build_info{version, role}   gauge 1 (the version of common/version.h)
//   process_cpu_seconds_total            counter  user + system CPU time of this process
//   process_resident_memory_bytes        gauge    resident set size
//   process_virtual_memory_bytes         gauge    virtual memory size
//   process_open_fds / process_max_fds   gauges   open descriptors and their soft limit
//   process_start_time_seconds           gauge    start time, unix seconds
// The process families follow the Prometheus client guidelines' names and are read from /proc/self
// at each scrape; one that cannot be read is left out (never an error). Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace prometheus {
class Collectable;
class Exposer;
}  // namespace prometheus

namespace sketchps {

std::shared_ptr<prometheus::Collectable> StandardMetrics(const std::string& role);

// The Prometheus text exposition of every family of `collectables` (what /metrics serves).
std::string ExpositionText(const std::vector<std::shared_ptr<prometheus::Collectable>>& collectables);

// Serves `collectables` at http://<address>/metrics ("host:port"; port 0 picks a free one) until the
// endpoint is destroyed; it keeps the collectables alive. Unavailable naming `flag` and the address
// when it cannot bind.
struct MetricsEndpoint {
  std::unique_ptr<prometheus::Exposer> exposer;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables;
  int port = 0;
  MetricsEndpoint();
  MetricsEndpoint(MetricsEndpoint&&) noexcept;
  MetricsEndpoint& operator=(MetricsEndpoint&&) noexcept;
  ~MetricsEndpoint();
};
absl::StatusOr<MetricsEndpoint> ServeMetricsAt(const std::string& flag, const std::string& address,
                                               std::vector<std::shared_ptr<prometheus::Collectable>> collectables);

}  // namespace sketchps
