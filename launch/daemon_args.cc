#include "launch/daemon_args.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sketchps::launch {
namespace {

void Add(std::vector<std::string>& argv, const char* flag, const std::string& value) {
  if (!value.empty()) argv.insert(argv.end(), {flag, value});
}

void AddNumber(std::vector<std::string>& argv, const char* flag, double value) {
  if (value >= 0) argv.insert(argv.end(), {flag, absl::StrCat(value)});
}

std::vector<std::string> Common(const DaemonLaunch& d) {
  std::vector<std::string> argv{d.binary};
  Add(argv, "--job", d.job_path);
  for (const auto& kv : d.overrides) argv.insert(argv.end(), {"--set", kv});
  if (d.tls_dir.empty()) {
    argv.push_back("--insecure");
  } else {
    argv.insert(argv.end(), {"--tls-dir", d.tls_dir});
  }
  Add(argv, "--log-level", d.log_level);
  Add(argv, "--metrics-listen", d.metrics_listen);
  Add(argv, "--port-file", d.port_file);
  return argv;
}

}  // namespace

std::vector<std::string> ServerArgv(const ServerLaunch& s) {
  std::vector<std::string> argv = Common(s);
  argv.insert(argv.end(), {"--shard", std::to_string(s.shard), "--listen", s.listen});
  Add(argv, "--health-listen", s.health_listen);
  Add(argv, "--checkpoint-dir", s.checkpoint_dir);
  Add(argv, "--checkpoint-key-file", s.checkpoint_key_file);
  AddNumber(argv, "--idle-exit-seconds", s.idle_exit_seconds);
  AddNumber(argv, "--max-wait-seconds", s.max_wait_seconds);
  AddNumber(argv, "--grace-seconds", s.grace_seconds);
  argv.insert(argv.end(), s.extra.begin(), s.extra.end());
  return argv;
}

std::vector<std::string> WorkerArgv(const WorkerLaunch& w) {
  std::vector<std::string> argv = Common(w);
  argv.insert(argv.end(), {"--rank", std::to_string(w.rank), "--world-size", std::to_string(w.world_size), "--threads",
                           std::to_string(w.threads)});
  Add(argv, "--metrics-out", w.metrics_out);
  Add(argv, "--state-dir", w.state_dir);
  Add(argv, "--checkpoint-key-file", w.checkpoint_key_file);
  if (w.state_every_rounds > 0) argv.insert(argv.end(), {"--state-every-rounds", absl::StrCat(w.state_every_rounds)});
  if (w.stop_on_state_error) argv.push_back("--stop-on-state-error");
  if (!w.servers.empty()) argv.insert(argv.end(), {"--servers", absl::StrJoin(w.servers, ",")});
  Add(argv, "--listen", w.listen);
  Add(argv, "--peers-file", w.peers_file);
  if (!w.peers.empty()) argv.insert(argv.end(), {"--peers", absl::StrJoin(w.peers, ",")});
  if (w.peer_timeout_seconds > 0) {
    argv.insert(argv.end(), {"--peer-timeout-seconds", absl::StrCat(w.peer_timeout_seconds)});
  }
  argv.insert(argv.end(), w.extra.begin(), w.extra.end());
  return argv;
}

std::vector<std::string> ChildEnv(int threads) {
  return {absl::StrCat("OMP_NUM_THREADS=", threads), "OMP_WAIT_POLICY=PASSIVE"};
}

}  // namespace sketchps::launch
