// Port files: how a daemon tells whoever started it which ports it bound (it listens on port 0 and
// takes what the kernel gives, so no port chosen in advance can be taken meanwhile). One JSON object,
// written atomically once the daemon serves, so a reader sees the whole file or none:
//   {"grpc": 41123, "health": 41124, "metrics": 41125}   sketchps-server (health, metrics: when asked)
//   {"peer": 41126}                                      sketchps-worker in decentralized mode
// Launchers read it (launch/ports.h, `sketchps launch ports FILE`); nobody reads ports from a log.
// Thread-safe (no shared state).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sketchps {

struct PortReport {
  int grpc = 0;     // the ParameterServer service
  int health = 0;   // the plaintext grpc.health.v1 port
  int metrics = 0;  // Prometheus /metrics
  int peer = 0;     // a decentralized worker's Peer service
};

// Writes the ports that are not 0. Internal error naming the file when it cannot be written.
absl::Status WritePortFile(const std::string& path, const PortReport& ports);
// The ports in `text` (the content of the file at `path`, named in errors): InvalidArgument when it
// is not such an object or a port is outside [1, 65535].
absl::StatusOr<PortReport> ParsePortFile(const std::string& text, const std::string& path);
// NotFound while the file does not exist; else ParsePortFile of its content.
absl::StatusOr<PortReport> ReadPortFile(const std::string& path);
// The report as the JSON object above.
std::string PortFileText(const PortReport& ports);

}  // namespace sketchps
