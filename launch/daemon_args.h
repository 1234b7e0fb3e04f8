// The daemons' command lines, written once for every launcher: `sketchps run` (tools/run.cc), the
// load generator (bench/loadgen) and, through `sketchps launch argv` (launch/py/launcher.py), the
// Python harness bench/e2e. deploy/emulate does not use them: it runs the compose file's commands as
// written, which is what it emulates. A field left at its default adds no flag, so the daemon's own
// default applies (documented in its --help).
//
//   ServerLaunch s;  s.binary = *FindBinary(Program::kServer, "");  s.job_path = "job.yaml";  s.shard = 1;
//   Child::Start("server 1", ServerArgv(s), "server-1.log", ChildEnv(1));
//
// Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sketchps::launch {

// sketchps-server's exit code when its accept loop stalled (--accept-stall-seconds): it drained and
// checkpointed, and wants a supervisor to start it again (server/main.cc).
inline constexpr int kServerExitAcceptStalled = 5;

// What both daemons take: the job, how to reach the others, how loud to be.
struct DaemonLaunch {
  std::string binary;                  // the executable (launch/binaries.h)
  std::string job_path;                // --job ("" : the embedded default job)
  std::vector<std::string> overrides;  // --set key=value, in order
  std::string tls_dir;                 // --tls-dir; "" : --insecure (plaintext)
  std::string log_level;               // --log-level ("" : the daemon's default)
  std::string metrics_listen;          // --metrics-listen ("" : no /metrics)
  std::string port_file;               // --port-file: the ports it bound (common/net/port_file.h)
  std::vector<std::string> extra;      // further flags, appended as given
};

struct ServerLaunch : DaemonLaunch {
  std::uint32_t shard = 0;
  std::string listen = "127.0.0.1:0";  // --listen (port 0: any free port, reported in the port file)
  std::string health_listen;           // --health-listen, the plaintext probe port ("" : none)
  std::string checkpoint_dir;          // --checkpoint-dir ("" : the job's checkpoint.dir)
  std::string checkpoint_key_file;     // --checkpoint-key-file ("" : untagged checkpoints)
  double idle_exit_seconds = -1;       // --idle-exit-seconds (< 0: the daemon's default)
  double max_wait_seconds = -1;        // --max-wait-seconds (< 0: the daemon's default)
  double grace_seconds = -1;           // --grace-seconds (< 0: the daemon's default)
};

struct WorkerLaunch : DaemonLaunch {
  std::uint32_t rank = 0;
  std::uint32_t world_size = 1;
  std::string metrics_out;               // --metrics-out, one JSON line per round
  std::string state_dir;                 // ps mode: --state-dir, the schemes' state across restarts
  std::uint64_t state_every_rounds = 0;  // > 0 gives --state-every-rounds
  bool stop_on_state_error = false;      // --stop-on-state-error
  std::string checkpoint_key_file;       // --checkpoint-key-file for the state files ("" : untagged)
  int threads = 1;                       // --threads
  std::vector<std::string> servers;      // ps mode: --servers, by shard
  std::string listen;                    // decentralized: --listen (this worker's Peer service)
  std::string peers_file;                // decentralized: --peers-file ...
  std::vector<std::string> peers;        // ... or --peers, by rank
  double peer_timeout_seconds = 0;       // decentralized: > 0 gives --peer-timeout-seconds
};

std::vector<std::string> ServerArgv(const ServerLaunch& launch);
std::vector<std::string> WorkerArgv(const WorkerLaunch& launch);

// The environment a launcher gives every child ("NAME=value"): OpenMP reads its settings once, when
// it loads, so the thread count and a passive wait policy must be set before the process starts
// (busy-waiting OpenMP threads of several processes on a few cores would starve each other).
std::vector<std::string> ChildEnv(int threads);

}  // namespace sketchps::launch
