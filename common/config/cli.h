// Command-line pieces shared by the daemons and the front end (CLI11).
//
//   --job FILE      the job spec (env SKETCHPS_JOB; empty: the embedded default job)
//   --set KEY=VALUE overrides one job-spec key, repeatable ("scheme.name=topk")
//   --log-level     trace|debug|info|warn|error (env SKETCHPS_LOG_LEVEL; default info)
//   --tls-dir DIR   the job's certificates from `sketchps certs` (env SKETCHPS_TLS_DIR)
//   --insecure      plaintext, no identities (env SKETCHPS_INSECURE=1); one of the two is required
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/net/tls.h"

// CLI11 is header-only and costs every includer 5 to 6 s of parsing; callers that build a command
// line include <CLI/CLI.hpp> themselves.
namespace CLI {
class App;
}  // namespace CLI

namespace sketchps {

struct JobFlags {
  std::string job_path;
  std::vector<std::string> overrides;
  std::string log_level = "info";
};

void AddJobFlags(CLI::App& app, JobFlags& flags);

struct TlsFlags {
  std::string dir;
  bool insecure = false;
};
void AddTlsFlags(CLI::App& app, TlsFlags& flags);
// The TLS configuration of identity `self` ("worker-3") from the flags. InvalidArgument naming the
// flags when neither --tls-dir nor --insecure is given, or both are.
absl::StatusOr<TlsConfig> ResolveTls(const TlsFlags& flags, const Identity& self);
// Sets spdlog's level and a pattern that names the process ("[server 1]"); call after parsing.
void ConfigureLogging(const JobFlags& flags, const std::string& process_name);

// Parses the command line. nullopt: go on; otherwise the process's exit code: 0 after --help or
// --version, 2 for a bad flag or value (CLI11's message is printed; CLI11's own codes 104-109
// would make Kubernetes retry a misconfiguration).
std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv);

// An environment variable holding a non-negative integer: nullopt when unset; InvalidArgument
// naming the variable when set to anything else ("WORLD_SIZE: 'two' is not a non-negative integer").
absl::StatusOr<std::optional<std::uint32_t>> EnvUint32(const char* name);

// Raises the soft limit of open files to the hard limit (gRPC needs a descriptor per connection;
// docs/security.md "Limits"). Returns the soft limit now in force.
std::uint64_t RaiseFileLimit();

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and every thread it starts afterwards;
// call first in main(), then WaitForTerminationSignal() receives them synchronously.
void BlockTerminationSignals();
// Waits for one of them; returns its name ("SIGTERM").
std::string WaitForTerminationSignal();
// Non-blocking: the name of a pending termination signal, or "" when none.
std::string PendingTerminationSignal();
// The shell convention for a process stopped by that signal: 128 + its number (SIGTERM: 143).
int TerminationExitCode(const std::string& signal_name);

// Server addresses from a --servers value: a comma-separated list in shard order, or one address
// with "{shard}" in it, expanded for shards 0 .. servers - 1 ("ps-{shard}.ps:7070"). InvalidArgument
// naming --servers when the count is not `servers`.
absl::StatusOr<std::vector<std::string>> ServerAddresses(const std::string& flag, std::uint32_t servers);

}  // namespace sketchps
