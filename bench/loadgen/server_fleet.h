// The S `sketchps-server` processes of one parameter-server configuration of the load generator.
//
// Start() launches shard s as
//   sketchps-server --job <dir>/job.yaml --shard s --listen 127.0.0.1:0 --port-file <dir>/server-s.port
//                   --metrics-listen 127.0.0.1:0 --insecure --idle-exit-seconds N
// (launch/daemon_args.h) with OMP_NUM_THREADS=1 (as `sketchps run` starts them), logs in
// <dir>/server-s.log and the pids in <dir>/server.pids (so that whoever started this process can
// kill them if it cannot), and waits until every shard serves: its port file names its gRPC and
// /metrics ports (launch/ports.h).
//
// Life cycle: the job ends as a real one does: every worker leaves (Transport::Finish) and each
// shard exits 0 by itself; AwaitExit() checks that. Stop() (SIGTERM, then SIGKILL) is for failures;
// the destructor kills whatever still runs, and --idle-exit-seconds makes an orphaned shard (this
// process killed with SIGKILL) exit by itself once no worker calls it.
//
// Thread-safety: Scrape() may run on any thread concurrently with itself; the other methods belong
// to the owning thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/loadgen/figures.h"
#include "launch/child.h"

namespace sketchps::bench {

struct FleetOptions {
  std::string server_bin;  // the sketchps-server executable
  std::string dir;         // holds job.yaml; logs, port files and server.pids go here
  std::uint32_t servers = 2;
  double idle_exit_seconds = 120;  // the servers' --idle-exit-seconds
  absl::Duration start_timeout = absl::Seconds(60);
};

class ServerFleet {
 public:
  // Errors: a server that cannot be started, exits, or does not serve within start_timeout, named
  // with the last lines of its log. The servers already started are killed.
  static absl::StatusOr<std::unique_ptr<ServerFleet>> Start(const FleetOptions& options);
  ~ServerFleet();

  // "127.0.0.1:<port>" per shard, in shard order.
  const std::vector<std::string>& addresses() const { return addresses_; }

  // sketchps_bytes_in_total / _out_total of every shard, from its /metrics. Errors: the scrape's.
  absl::StatusOr<std::vector<ServerTotals>> Scrape() const;

  // Waits up to `timeout` for every shard to exit by itself (the workers have left). Shards still
  // running are then stopped. Internal error naming the first shard that did not exit 0.
  absl::Status AwaitExit(absl::Duration timeout);

  // SIGTERM to every shard still running, SIGKILL 20 s later. Idempotent.
  void Stop();

 private:
  ServerFleet() = default;
  absl::Status Launch(const FleetOptions& options, std::uint32_t shard);
  absl::Status AwaitServing(std::uint32_t shard, absl::Time deadline);

  std::string dir_;
  std::vector<launch::Child> servers_;
  std::vector<std::string> addresses_;
  std::vector<int> metrics_ports_;
};

}  // namespace sketchps::bench
