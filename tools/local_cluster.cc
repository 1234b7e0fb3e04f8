#include "tools/local_cluster.h"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/net/rendezvous_file.h"
#include "common/status.h"
#include "launch/binaries.h"
#include "launch/ports.h"
#include "tools/resume_round.h"

namespace sketchps::tools {
namespace fs = std::filesystem;
namespace {

constexpr absl::Duration kStartTimeout = absl::Seconds(60);
// A failed or interrupted run's teardown (StopAll): every process gets SIGTERM at once, SIGKILL after
// kStopGrace. A shard's own drain grace is shorter, so that it writes its final checkpoint in time:
// the workers stop at the same moment, so the phases it holds would never complete anyway.
constexpr absl::Duration kStopGrace = absl::Seconds(3);
constexpr double kServerDrainSeconds = 0.5;
// The workers get longer: a ps worker finishes the round in progress first, or gives up on it after
// 2 s (worker/trainer.cc), then waits for its state file.
constexpr absl::Duration kWorkerStopGrace = absl::Seconds(5);

}  // namespace

absl::Status LocalCluster::Prepare() {
  SKETCHPS_ASSIGN_OR_RETURN(server_bin_, launch::FindBinary(launch::Program::kServer, o_.bin_dir));
  if (o_.script.path.empty()) {  // a script's workers are the script: no sketchps-worker needed (a bundle has none)
    SKETCHPS_ASSIGN_OR_RETURN(worker_bin_, launch::FindBinary(launch::Program::kWorker, o_.bin_dir));
  }
  ports_.assign(decentralized() ? job_.workers : job_.servers, 0);
  return absl::OkStatus();
}

fs::path LocalCluster::PortFile(const char* role, std::uint32_t index) const {
  return o_.out / absl::StrCat(role, "-", index, ".port");
}

launch::DaemonLaunch LocalCluster::Common() const {
  launch::DaemonLaunch d;
  d.job_path = (o_.out / "job.yaml").string();
  d.tls_dir = o_.tls_dir;
  d.log_level = o_.log_level;
  return d;
}

launch::ServerLaunch LocalCluster::Server(std::uint32_t s) const {
  launch::ServerLaunch l;
  static_cast<launch::DaemonLaunch&>(l) = Common();
  l.binary = server_bin_;
  l.shard = s;
  l.listen = absl::StrCat("127.0.0.1:", ports_[s]);  // a restarted shard binds the port it had
  l.port_file = PortFile("server", s).string();
  l.checkpoint_dir = o_.checkpoint_dir.string();
  l.checkpoint_key_file = o_.checkpoint_key_file;
  l.grace_seconds = kServerDrainSeconds;
  return l;
}

launch::WorkerLaunch LocalCluster::Worker(std::uint32_t r, const std::vector<std::string>& servers) const {
  launch::WorkerLaunch l;
  static_cast<launch::DaemonLaunch&>(l) = Common();
  l.binary = worker_bin_;
  l.rank = r;
  l.world_size = job_.workers;
  l.metrics_out = (o_.out / absl::StrCat("worker-", r, ".jsonl")).string();
  l.threads = o_.worker_threads;
  if (decentralized()) {
    l.listen = "127.0.0.1:0";
    l.port_file = PortFile("worker", r).string();
    l.peers_file = (o_.out / "peers.txt").string();
    l.peer_timeout_seconds = o_.peer_timeout_seconds;
  } else {
    l.servers = servers;
    // After every round: a worker killed and restarted (--kill) and a --resume after Ctrl-C or a
    // failure go on with its exact state (tools/resume_round.h); a file that cannot be written fails
    // the run instead of making that silently untrue.
    l.state_dir = (o_.out / kWorkerStateFolder).string();
    l.state_every_rounds = 1;
    l.stop_on_state_error = true;
    l.checkpoint_key_file = o_.checkpoint_key_file;
  }
  if (!o_.dump_rounds.empty()) {
    l.extra = {"--dump-gradients", absl::StrJoin(o_.dump_rounds, ","), "--dump-dir", (o_.out / "gradients").string()};
  }
  if (r < o_.worker_flags.size()) l.extra.insert(l.extra.end(), o_.worker_flags[r].begin(), o_.worker_flags[r].end());
  return l;
}

absl::Status LocalCluster::StartServer(std::uint32_t s) {
  fs::remove(PortFile("server", s));
  SKETCHPS_ASSIGN_OR_RETURN(
      launch::Child child,
      launch::Child::Start(absl::StrCat("server ", s), launch::ServerArgv(Server(s)),
                           (o_.out / absl::StrCat("server-", s, ".log")).string(), launch::ChildEnv(1)));
  if (s < servers_.size()) {
    servers_[s] = std::move(child);
  } else {
    servers_.push_back(std::move(child));
  }
  return absl::OkStatus();
}

absl::Status LocalCluster::StartServers() {
  if (decentralized()) return absl::OkStatus();  // the workers reach each other directly
  for (std::uint32_t s = 0; s < job_.servers; ++s) SKETCHPS_RETURN_IF_ERROR(StartServer(s));
  for (std::uint32_t s = 0; s < job_.servers; ++s) {
    SKETCHPS_ASSIGN_OR_RETURN(const PortReport ports,
                              launch::AwaitPortFile(servers_[s], PortFile("server", s).string(), kStartTimeout));
    ports_[s] = ports.grpc;
  }
  std::fprintf(stderr, "run: %u servers serving on ports %s\n", job_.servers, absl::StrJoin(ports_, ", ").c_str());
  return absl::OkStatus();
}

// Decentralized mode: once every worker's Peer service reports its port, every worker gets the list.
absl::Status LocalCluster::PublishPeers() {
  std::vector<std::string> addresses;
  for (std::uint32_t r = 0; r < job_.workers; ++r) {
    SKETCHPS_ASSIGN_OR_RETURN(const PortReport ports,
                              launch::AwaitPortFile(workers_[r], PortFile("worker", r).string(), kStartTimeout));
    ports_[r] = ports.peer;
    addresses.push_back(absl::StrCat("127.0.0.1:", ports_[r]));
  }
  return WriteFileAtomically((o_.out / "peers.txt").string(), absl::StrJoin(addresses, ",") + "\n");
}

absl::Status LocalCluster::StartWorker(std::uint32_t r) {
  std::vector<std::string> servers;
  if (!decentralized()) {
    for (int p : ports_) servers.push_back(absl::StrCat("127.0.0.1:", p));
  }
  const launch::WorkerLaunch worker = Worker(r, servers);
  std::vector<std::string> argv = launch::WorkerArgv(worker);
  std::vector<std::string> env = launch::ChildEnv(o_.worker_threads);
  if (!o_.script.path.empty()) {
    argv = ScriptArgv(o_.script);
    for (auto& e : ScriptEnv(o_.script, worker)) env.push_back(std::move(e));
  }
  SKETCHPS_ASSIGN_OR_RETURN(launch::Child child,
                            launch::Child::Start(absl::StrCat("worker ", r), std::move(argv),
                                                 (o_.out / absl::StrCat("worker-", r, ".log")).string(), env));
  if (r < workers_.size()) {
    workers_[r] = std::move(child);
  } else {
    workers_.push_back(std::move(child));
  }
  return absl::OkStatus();
}

absl::Status LocalCluster::StartWorkers() {
  for (std::uint32_t r = 0; r < job_.workers; ++r) SKETCHPS_RETURN_IF_ERROR(StartWorker(r));
  if (decentralized()) SKETCHPS_RETURN_IF_ERROR(PublishPeers());
  return absl::OkStatus();
}

absl::StatusOr<bool> LocalCluster::Kill(bool server, std::uint32_t index) {
  launch::Child& victim = server ? servers_.at(index) : workers_.at(index);
  const bool was_running = !victim.Poll();
  victim.Signal(SIGKILL);
  while (!victim.Poll()) absl::SleepFor(absl::Milliseconds(5));
  // A decentralized worker cannot rejoin (its peers regroup without it); a worker that had already
  // finished has nothing left to do.
  if (!server && (decentralized() || !was_running)) return false;
  SKETCHPS_RETURN_IF_ERROR(server ? StartServer(index) : StartWorker(index));
  return true;
}

std::vector<std::uint32_t> LocalCluster::RestartStalledServers() {
  std::vector<std::uint32_t> restarted;
  for (std::uint32_t s = 0; s < servers_.size(); ++s) {
    if (servers_[s].Poll() != launch::kServerExitAcceptStalled) continue;
    if (auto st = StartServer(s); !st.ok()) {
      std::fprintf(stderr, "run: restarting server %u failed: %s\n", s, st.ToString().c_str());
      continue;  // its exit code then fails the run (FirstFailure)
    }
    restarted.push_back(s);
  }
  return restarted;
}

std::optional<Failure> LocalCluster::FirstFailure(const std::set<std::uint32_t>& spared) {
  for (auto& s : servers_) {
    // A shard exits 0 by itself once every worker has left the job (Leave).
    if (auto code = s.Poll(); code && *code != 0) return Failure{&s, *code};
  }
  for (std::uint32_t r = 0; r < workers_.size(); ++r) {
    if (spared.contains(r)) continue;
    if (auto code = workers_[r].Poll(); code && *code != 0) return Failure{&workers_[r], *code};
  }
  return std::nullopt;
}

bool LocalCluster::WorkersDone(const std::set<std::uint32_t>& spared) {
  for (std::uint32_t r = 0; r < workers_.size(); ++r) {
    if (!spared.contains(r) && !workers_[r].Poll()) return false;
  }
  return true;
}

bool LocalCluster::ServersDone() {
  for (auto& s : servers_) {
    if (!s.Poll()) return false;
  }
  return true;
}

std::vector<std::string> LocalCluster::WorkerEnvironment() const {
  std::vector<std::string> servers;
  for (int port : ports_) servers.push_back(absl::StrCat("127.0.0.1:", port));
  launch::WorkerLaunch w = Worker(0, servers);
  w.metrics_out = (o_.out / "worker-{rank}.jsonl").string();
  std::vector<std::string> env;
  for (std::string& e : ScriptEnv(o_.script, w)) {
    if (e.rfind("RANK=", 0) == 0 || e.rfind("LOCAL_RANK=", 0) == 0 || e.rfind("WORLD_SIZE=", 0) == 0 ||
        e.rfind("MASTER_", 0) == 0) {
      continue;  // torchrun's
    }
    for (const char* path : {"SKETCHPS_JOB=", "SKETCHPS_METRICS_OUT=", "SKETCHPS_TLS_DIR=", "SKETCHPS_STATE_DIR=",
                             "SKETCHPS_CHECKPOINT_KEY_FILE="}) {
      if (e.rfind(path, 0) == 0) e = path + std::filesystem::absolute(e.substr(std::strlen(path))).string();
    }
    env.push_back(std::move(e));
  }
  // Each rank's pid and whether it left the job (tools/worker_watch.h): torchrun's ranks are not ours.
  env.push_back(
      absl::StrCat("SKETCHPS_STATUS_FILE=", std::filesystem::absolute(o_.out / "worker-{rank}.status").string()));
  return env;
}

void LocalCluster::StopAll() {
  std::vector<launch::Child*> servers, workers;
  for (auto& s : servers_) servers.push_back(&s);
  for (auto& w : workers_) workers.push_back(&w);
  launch::StopTogether(workers, kWorkerStopGrace);
  launch::StopTogether(servers, kStopGrace);
}

absl::Status LocalCluster::StopServers() {
  for (auto& s : servers_) {
    // Servers exit 0 by themselves once every worker has left; one still running is stopped with
    // SIGTERM, drains, checkpoints and exits 143. Anything else is a failure of the run.
    if (const int status = s.Stop(absl::Seconds(15)); status != 0 && status != 143) {
      return absl::InternalError(absl::StrCat(s.name(), " did not stop cleanly on SIGTERM (exit code ", status,
                                              "); last log lines:\n", s.LogTail(10)));
    }
  }
  return absl::OkStatus();
}

}  // namespace sketchps::tools
