// LocalCluster: the processes of one job on this machine, for `sketchps run` (tools/run.h): S
// sketchps-server shards (ps mode) and P workers (sketchps-worker, or the user's script), all on
// loopback. Every process binds port 0 and reports what it got in a port file (launch/ports.h); a
// restarted shard binds the port it had. Logs, metrics and port files go to the run directory.
//
//   LocalCluster cluster(options);
//   cluster.Start();                          // servers (waits until they serve), then workers
//   while (...) { if (auto failed = cluster.FirstFailure(killed)) ...; }
//   cluster.StopServers();                    // they exit 0 by themselves at the job's end
//
// Not thread-safe. Destroying it kills whatever still runs (launch/child.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "job/job_spec.h"
#include "launch/child.h"
#include "launch/daemon_args.h"
#include "tools/run_script.h"

namespace sketchps::tools {

struct ClusterOptions {
  std::filesystem::path out;             // the run directory
  std::filesystem::path checkpoint_dir;  // the servers' --checkpoint-dir
  std::string checkpoint_key_file;       // the servers' and workers' --checkpoint-key-file ("" : none)
  std::string bin_dir;                   // where the daemons are ("" : next to this binary)
  std::string log_level = "warn";
  std::string tls_dir;  // "" : plaintext (--insecure)
  int worker_threads = 1;
  double peer_timeout_seconds = 0;                     // > 0: overrides the job's peer.timeout_seconds
  std::vector<std::uint64_t> dump_rounds;              // workers write their gradients of these rounds
  ScriptOptions script;                                // path set: the workers run the user's Python script
  std::vector<std::vector<std::string>> worker_flags;  // by rank: further worker flags (--scale)
};

// A process that ended with a non-zero exit code while it should not have.
struct Failure {
  launch::Child* child = nullptr;
  int code = 0;
};

class LocalCluster {
 public:
  LocalCluster(const JobSpec& job, ClusterOptions options) : job_(job), o_(std::move(options)) {}

  // Finds the daemons (NotFound naming --bin-dir).
  absl::Status Prepare();
  // ps mode: the shards, until each serves. Errors name the process and show its log's end.
  absl::Status StartServers();
  // The workers; decentralized: once every Peer service reports its port, they get the list.
  absl::Status StartWorkers();
  // SIGKILL of one process (waits until it is gone), then started again with the same flags: a shard
  // (it recovers from its checkpoint and the workers' replicas), and in ps mode a worker that was
  // still running (it joins again and restores its state of the shards' round from its state file,
  // session/scheme_state_file.h). Returns whether it was restarted (a decentralized worker is not: it
  // cannot rejoin, its peers regroup without it).
  absl::StatusOr<bool> Kill(bool server, std::uint32_t index);
  // Shards that exited with launch::kServerExitAcceptStalled (their accept loop stalled, e.g. after
  // file-descriptor exhaustion: they drained and checkpointed first) are started again, as a
  // supervisor would; returns them.
  std::vector<std::uint32_t> RestartStalledServers();

  // The first shard that failed, or worker outside `spared` (killed on purpose) with a non-zero exit.
  std::optional<Failure> FirstFailure(const std::set<std::uint32_t>& spared);
  // Whether every worker outside `spared` has exited (with code 0: FirstFailure reports the others).
  bool WorkersDone(const std::set<std::uint32_t>& spared);
  // Whether every shard has exited (they do by themselves once every worker has left the job).
  bool ServersDone();
  // The workers' environment for a launcher of their own (torchrun): rank-independent variables
  // of ScriptEnv (tools/run_script.h), SKETCHPS_METRICS_OUT with {rank} for the rank.
  std::vector<std::string> WorkerEnvironment() const;

  // After a failure or a signal: SIGTERM to the workers, SIGKILL to those still running after a few
  // seconds; then the same for the shards (they drain, write their final checkpoint and exit 143).
  // The workers go first: a ps worker finishes the round it has started (pushed to every shard, or
  // to none) and stops before the next (worker/trainer.cc), so every shard applies the same rounds
  // and every worker holds the state of the last one; a --resume then finds the shards and every
  // worker at the same round (tools/resume_round.h).
  void StopAll();
  // At the job's end: shards that still run get SIGTERM; each must end with 0 or 143 (drained).
  absl::Status StopServers();

  const std::vector<int>& ports() const { return ports_; }

 private:
  bool decentralized() const { return job_.decentralized(); }
  std::filesystem::path PortFile(const char* role, std::uint32_t index) const;
  launch::DaemonLaunch Common() const;
  launch::ServerLaunch Server(std::uint32_t s) const;
  launch::WorkerLaunch Worker(std::uint32_t r, const std::vector<std::string>& servers) const;
  absl::Status StartServer(std::uint32_t s);
  absl::Status StartWorker(std::uint32_t r);
  absl::Status PublishPeers();

  const JobSpec& job_;
  const ClusterOptions o_;
  std::string server_bin_, worker_bin_;
  std::vector<int> ports_;  // the shards' (ps) or the workers' Peer services' (decentralized)
  std::vector<launch::Child> servers_, workers_;
};

}  // namespace sketchps::tools
