// Reading a server's Prometheus /metrics for the load generator (bench/loadgen/loadgen.h): a plain
// HTTP/1.0 GET on loopback and a reader of the text exposition format. Stateless and thread-safe.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace sketchps::bench {

// Prometheus text exposition: the sum of the samples of metric `name` whose labels include every
// pair of `labels` (e.g. {{"shard", "0"}}). Longer names that share the prefix do not match; a
// trailing timestamp is ignored. NotFound when no sample matches.
absl::StatusOr<double> PrometheusValue(const std::string& text, const std::string& name,
                                       const std::map<std::string, std::string>& labels = {});

// GET http://127.0.0.1:<port>/metrics (HTTP/1.0, `timeout_ms` for connect and each read); the body.
// Unavailable: cannot connect, or an answer other than 200 (named in the message); DeadlineExceeded:
// a read timed out; DataLoss: not an HTTP response.
absl::StatusOr<std::string> ScrapeMetrics(int port, int timeout_ms = 5000);

}  // namespace sketchps::bench
