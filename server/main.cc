// sketchps-server: one parameter-server shard.
//
//   sketchps-server --job job.yaml --shard 0 --listen 0.0.0.0:7070 [--metrics-listen 0.0.0.0:9090]
//                   [--checkpoint-dir DIR [--checkpoint-key-file FILE]] [--port-file FILE] [--set key=value]...
//
// --checkpoint-key-file (env SKETCHPS_CHECKPOINT_KEY_FILE): a private file of 32+ bytes; the shard's
// checkpoints carry an HMAC-SHA256 integrity tag under it, and a checkpoint whose tag is missing or
// wrong is refused (exit 2) naming the file (common/wire/framed_file.h, docs/security.md).
//
// Shard id: --shard, else env SKETCHPS_SHARD, else the trailing "-N" of the hostname (a StatefulSet
// ordinal). Serves sketchps.v1.ParameterServer and grpc.health.v1.Health on --listen (service ""
// for readiness, "liveness" for liveness).
// The shard exits 0 once every worker has left the job (Leave). SIGTERM/SIGINT: readiness turns
// NOT_SERVING (liveness stays SERVING until exit), new phases are refused, phases in flight finish
// (up to --grace-seconds; calls still waiting then are answered UNAVAILABLE), a checkpoint is
// written, exit 128 + the signal (143 for SIGTERM), so a supervisor can tell a stopped shard from
// a finished job. No call from any worker for --idle-exit-seconds (the workers failed or left
// while this shard was down): exit 4. A listening port that has stopped accepting connections for
// --accept-stall-seconds (gRPC 1.51 after file-descriptor exhaustion, CVE-2023-4785:
// common/net/accept_watch.h): the shard drains the same way and exits 5, so that its supervisor
// restarts it.
// Exit codes: 0 job finished; 1 runtime failure (cannot listen, final checkpoint failed, ...);
// 2 bad configuration or an unusable checkpoint; 4 idle; 5 accept loop stalled (restart it);
// 130/143 stopped by SIGINT/SIGTERM.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/config/cli.h"
#include "common/net/accept_watch.h"
#include "common/net/grpc_edge.h"
#include "common/net/port_file.h"
#include "common/net/rendezvous_file.h"
#include "common/wire/file_key.h"
#include "engine/phase.h"
#include "job/job_spec.h"
#include "kernels/backend.h"
#include "launch/daemon_args.h"
#include "ps/metrics.h"
#include "ps/service.h"
#include "ps/shard_host.h"
#include "server/job_adapter.h"
#include "spdlog/spdlog.h"

namespace {

using namespace sketchps;

constexpr int kExitIdle = 4;
constexpr int kExitAcceptStalled = launch::kServerExitAcceptStalled;

struct Flags {
  JobFlags job;
  std::optional<std::uint32_t> shard;
  std::string listen = "0.0.0.0:7070";
  std::string metrics_listen;
  std::string checkpoint_dir;
  std::string checkpoint_key_file;
  std::string port_file;
  std::string health_listen;
  TlsFlags tls;
  double max_wait_seconds = 30;
  double grace_seconds = 10;
  double idle_exit_seconds = 3600;
  double accept_stall_seconds = 10;
  int max_message_mb = 0;
};

// The trailing "-N" of the hostname, as in a StatefulSet pod "sketchps-server-1".
std::optional<std::uint32_t> OrdinalFromHostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return std::nullopt;
  const std::string host(name);
  const auto dash = host.rfind('-');
  std::uint32_t n = 0;
  if (dash == std::string::npos || !absl::SimpleAtoi(host.substr(dash + 1), &n)) return std::nullopt;
  return n;
}

// The job and the shard opened on it (its checkpoint restored). The host points at the metrics, so
// neither moves.
struct OpenShard {
  explicit OpenShard(std::uint32_t shard_id) : metrics(shard_id) {}
  JobSpec job;
  ps::HostOptions options;
  ps::ServerMetrics metrics;
  std::unique_ptr<ps::ShardHost> host;
};

// Loads the job and opens the shard: 0, or exit code 2 (logged) for a bad job, key or checkpoint.
int Open(const Flags& flags, std::uint32_t shard_id, OpenShard& opened) {
  auto job = LoadJobSpec(flags.job.job_path, flags.job.overrides);
  if (!job.ok()) {
    spdlog::error("bad job spec: {}", std::string(job.status().message()));
    return 2;
  }
  if (job->layout.layers.empty()) {
    spdlog::error("bad job spec: layers: model: custom needs the model's layout (`sketchps run --script` adds it)");
    return 2;
  }
  if (job->decentralized()) {  // no worker of such a job would ever join: it would wait --idle-exit-seconds
    spdlog::error("bad job spec: mode: decentralized has no servers (its workers exchange with each other)");
    return 2;
  }
  opened.job = *std::move(job);
  opened.options = ps::HostOptionsFor(opened.job, shard_id,
                                      flags.checkpoint_dir.empty() ? opened.job.checkpoint.dir : flags.checkpoint_dir);
  auto key = FileKey::LoadIfGiven(flags.checkpoint_key_file);
  if (!key.ok()) {
    spdlog::error("--checkpoint-key-file: {}", std::string(key.status().message()));
    return 2;
  }
  opened.options.checkpoint_key = *std::move(key);
  auto host = ps::ShardHost::Open(opened.options, &opened.metrics);
  if (!host.ok()) {
    spdlog::error("cannot start shard {}: {}", shard_id, std::string(host.status().message()));
    return 2;
  }
  opened.host = *std::move(host);
  return 0;
}

// The shard's gRPC server and what it listens on.
struct Listening {
  bool insecure = false;
  std::unique_ptr<ps::ParameterServerService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0, health_port = 0;
  std::optional<ps::MetricsEndpoint> endpoint;
  std::uint64_t open_files = 0;
};

// The metrics endpoint (--metrics-listen) and the port file (--port-file): 0, or exit code 1 (logged).
int ServeMetricsAndPorts(const Flags& flags, ps::ServerMetrics& metrics, Listening& l) {
  if (!flags.metrics_listen.empty()) {
    auto served = ps::ServeMetrics(flags.metrics_listen, metrics);
    if (!served.ok()) {
      spdlog::error("{}", std::string(served.status().message()));
      return 1;
    }
    l.endpoint = std::move(*served);
  }
  if (!flags.port_file.empty()) {
    const PortReport ports{.grpc = l.port, .health = l.health_port, .metrics = l.endpoint ? l.endpoint->port : 0};
    if (auto st = WritePortFile(flags.port_file, ports); !st.ok()) {
      spdlog::error("{}", std::string(st.message()));
      return 1;
    }
  }
  return 0;
}

// Serves the shard on --listen (and --health-listen, --metrics-listen) and writes the port file: 0,
// or an exit code (logged): 2 for bad TLS settings, 1 when it cannot listen or write.
int Listen(const Flags& flags, std::uint32_t shard_id, OpenShard& opened, Listening& l) {
  auto tls = ResolveTls(flags.tls, Identity{Identity::Role::kServer, shard_id});
  auto credentials = tls.ok() ? MakeServerCredentials(*tls) : tls.status();
  if (!credentials.ok()) {
    spdlog::error("{}", std::string(credentials.status().message()));
    return 2;
  }
  l.insecure = tls->insecure;
  l.service =
      std::make_unique<ps::ParameterServerService>(*opened.host, absl::Seconds(flags.max_wait_seconds), !tls->insecure);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(flags.listen, *credentials, &l.port);
  // Kubernetes' gRPC probes speak plaintext: a second port serves them. The data calls on it are
  // refused (UNAUTHENTICATED) when the server runs with TLS.
  if (!flags.health_listen.empty()) {
    builder.AddListeningPort(flags.health_listen, grpc::InsecureServerCredentials(), &l.health_port);
  }
  const ServerOptions server_options = ps::ServerOptionsFor(opened.job, shard_id, flags.max_message_mb);
  ConfigureServer(builder, server_options);
  l.open_files = RaiseFileLimit();
  spdlog::info("messages up to {} bytes (--max-message-mb), gRPC memory quota {} bytes, open files limit {}",
               server_options.max_message_bytes, server_options.memory_quota_bytes, l.open_files);
  spdlog::info("kernels: {}", sketchps::kernels::BackendDescription());
  builder.RegisterService(l.service.get());
  l.server = builder.BuildAndStart();
  if (!l.server || l.port == 0 || (!flags.health_listen.empty() && l.health_port == 0)) {
    spdlog::error("--listen {} / --health-listen {}: cannot listen (address in use or invalid)", flags.listen,
                  flags.health_listen);
    return 1;
  }
  // Health: "" (readiness: NOT_SERVING from SIGTERM on) and "liveness" (SERVING until the process
  // exits, so a draining shard that writes its checkpoint is not killed by a liveness probe).
  l.server->GetHealthCheckService()->SetServingStatus("liveness", true);
  return ServeMetricsAndPorts(flags, opened.metrics, l);
}

// The shard's first lines: what it serves, where, from which state, and its checkpoints.
void LogServing(std::uint32_t shard_id, const OpenShard& opened, const Listening& l) {
  const JobSpec& job = opened.job;
  spdlog::info("shard {}/{} of job '{}' ({}, {} workers, scheme {}): listening on port {} ({}){}{}; {}; {}", shard_id,
               job.servers, job.job_id, job.model, job.workers, job.scheme.name, l.port,
               l.insecure ? "plaintext, no identities: --insecure" : "mutual TLS as server-" + std::to_string(shard_id),
               l.health_port ? absl::StrCat(", health on plaintext port ", l.health_port) : "",
               l.endpoint ? absl::StrCat(", metrics on port ", l.endpoint->port) : "", opened.host->origin(),
               opened.host->AssemblyStatus());
  const ps::HostOptions& options = opened.options;
  spdlog::info("checkpoints: {}",
               options.checkpoint_dir.empty()
                   ? std::string("off (no checkpoint.dir / --checkpoint-dir)")
                   : absl::StrCat(options.checkpoint_dir, " every ", options.checkpoint_every, " rounds",
                                  options.checkpoint_key
                                      ? absl::StrCat(", tagged with the key in ", options.checkpoint_key->source())
                                      : std::string(", untagged (no --checkpoint-key-file)")));
}

// Why the shard stops, and the exit code that reason asks for (0 unless the reason sets one).
struct StopReason {
  std::string signal;
  int exit_code = 0;
};

// Waits until a termination signal, the job's end, --idle-exit-seconds without a call, or a listening
// port that stopped accepting (--accept-stall-seconds).
StopReason WaitForStop(const Flags& flags, ps::ShardHost& host, const Listening& l) {
  std::vector<int> watched_ports{l.port};
  if (l.health_port != 0) watched_ports.push_back(l.health_port);
  AcceptWatch accept_watch(watched_ports, absl::Seconds(flags.accept_stall_seconds));
  absl::Time next_accept_sample = absl::Now();
  StopReason stop;
  while ((stop.signal = PendingTerminationSignal()).empty()) {
    if (flags.accept_stall_seconds > 0 && absl::Now() >= next_accept_sample) {
      next_accept_sample = absl::Now() + absl::Seconds(1);
      const bool was_exhausted = accept_watch.exhausted();
      const bool stalled = accept_watch.Sample(absl::Now());
      if (accept_watch.exhausted() && !was_exhausted) {
        spdlog::warn(
            "out of file descriptors (open files limit {}): new connections cannot be accepted; gRPC 1.51 "
            "may stop accepting for good (CVE-2023-4785), watched by --accept-stall-seconds",
            l.open_files);
      }
      if (stalled) {
        spdlog::error("{}: restarting (exit {}; the supervisor starts the shard again from its checkpoint)",
                      accept_watch.Describe(), kExitAcceptStalled);
        return {"accept loop stalled", kExitAcceptStalled};
      }
    }
    if (host.job_done()) return {"every worker has finished the job", 0};
    if (flags.idle_exit_seconds > 0 && host.idle() > absl::Seconds(flags.idle_exit_seconds)) {
      return {absl::StrCat("no worker has called for ", flags.idle_exit_seconds, " s (--idle-exit-seconds)"),
              kExitIdle};
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return stop;
}

// The drain: readiness off, new phases refused, phases in flight finish within --grace-seconds, the
// calls still waiting answered UNAVAILABLE, the server shut down, the final checkpoint. Returns the
// exit code.
int Drain(const Flags& flags, ps::ShardHost& host, grpc::Server& server, StopReason stop) {
  int exit_code = stop.exit_code;
  if (exit_code == 0 && !host.job_done()) exit_code = TerminationExitCode(stop.signal);
  spdlog::info("{}: stopping: refusing new phases, finishing the {} in flight", stop.signal, host.in_flight());
  server.GetHealthCheckService()->SetServingStatus("", false);
  host.BeginShutdown();
  const absl::Time grace_end = absl::Now() + absl::Seconds(flags.grace_seconds);
  while (host.in_flight() > 0 && absl::Now() < grace_end) absl::SleepFor(absl::Milliseconds(10));
  // Phases still open wait for workers that are gone or stopping too: their calls are answered
  // UNAVAILABLE now, else the gRPC server's shutdown would wait for their deadlines.
  if (const int waiting = host.in_flight(); waiting > 0) {
    spdlog::info("{} call(s) still waiting for their phase after --grace-seconds: answered UNAVAILABLE", waiting);
  }
  host.ReleaseInFlight();
  server.Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  if (auto st = host.CheckpointNow(); !st.ok()) {
    // Once every worker has finished, the job is done whatever the disk says: a non-zero exit would
    // only make restart policies start a shard that nobody will call again.
    const bool done = host.job_done();
    spdlog::error("final checkpoint failed{}: {}",
                  done ? " (the job is done: every worker finished; the newest checkpoint on disk is older)" : "",
                  std::string(st.message()));
    if (!done) return 1;
  }
  spdlog::info("stopped after {} rounds (exit code {})", host.rounds_applied(), exit_code);
  return exit_code;
}

int Run(const Flags& flags, std::uint32_t shard_id) {
  OpenShard opened(shard_id);
  if (int code = Open(flags, shard_id, opened)) return code;
  Listening listening;
  if (int code = Listen(flags, shard_id, opened, listening)) return code;
  LogServing(shard_id, opened, listening);
  const StopReason stop = WaitForStop(flags, *opened.host, listening);
  return Drain(flags, *opened.host, *listening.server, stop);
}

}  // namespace

int main(int argc, char** argv) {
  BlockTerminationSignals();
  Flags flags;
  CLI::App app{"sketchps-server: one parameter-server shard"};
  AddJobFlags(app, flags.job);
  app.add_option("--shard", flags.shard, "Shard id (env SKETCHPS_SHARD; default: the hostname's -N suffix)")
      ->envname("SKETCHPS_SHARD");
  app.add_option("--listen", flags.listen, "gRPC address (ParameterServer and grpc.health.v1)")->capture_default_str();
  app.add_option("--health-listen", flags.health_listen,
                 "A plaintext port for grpc.health.v1 only (Kubernetes probes), e.g. 0.0.0.0:7071");
  AddTlsFlags(app, flags.tls);
  app.add_option("--metrics-listen", flags.metrics_listen, "Prometheus /metrics address (empty: off)");
  app.add_option("--checkpoint-dir", flags.checkpoint_dir, "Checkpoint directory (overrides checkpoint.dir)");
  app.add_option("--checkpoint-key-file", flags.checkpoint_key_file,
                 "Private key file (32+ bytes, mode 600): checkpoints carry an HMAC-SHA256 integrity tag under it, "
                 "and untagged or mistagged ones are refused (env SKETCHPS_CHECKPOINT_KEY_FILE)")
      ->envname("SKETCHPS_CHECKPOINT_KEY_FILE");
  app.add_option("--port-file", flags.port_file,
                 "Once serving, write the bound ports here as JSON: {\"grpc\": N, \"health\": N, \"metrics\": N} "
                 "(common/net/port_file.h)");
  app.add_option("--max-wait-seconds", flags.max_wait_seconds, "Longest one PushPull waits for its phase")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--grace-seconds", flags.grace_seconds, "On SIGTERM, how long phases in flight may finish")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--idle-exit-seconds", flags.idle_exit_seconds,
                 "Exit (code 4) when no worker has called for this long; 0: never")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--accept-stall-seconds", flags.accept_stall_seconds,
                 "Exit (code 5, after a drain) when a listening port has had connections waiting to be accepted "
                 "for this long (gRPC 1.51 after descriptor exhaustion, CVE-2023-4785); 0: never")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-message-mb", flags.max_message_mb,
                 "Largest gRPC message accepted (default 0: the largest legal payload of this shard, plus a margin)")
      ->capture_default_str()
      ->check(CLI::Range(0, 2047));
  if (auto code = ParseCommandLine(app, argc, argv)) return *code;
  if (!sketchps::kernels::BackendRunsOrExplain("sketchps-server")) return 2;  // e.g. CUDA kernels, no device
  if (!flags.shard) flags.shard = OrdinalFromHostname();
  ConfigureLogging(flags.job, absl::StrCat("server ", flags.shard ? std::to_string(*flags.shard) : "?"));
  if (!flags.shard) {
    spdlog::error("--shard: not given, SKETCHPS_SHARD unset, and the hostname has no -N suffix");
    return 2;
  }
  return Run(flags, *flags.shard);
}
