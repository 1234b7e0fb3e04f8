#include "tools/launch_command.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "absl/time/clock.h"
#include "common/net/port_file.h"
#include "launch/binaries.h"
#include "launch/daemon_args.h"

namespace sketchps::tools {
namespace {

struct LaunchFlags {
  launch::ServerLaunch server;
  launch::WorkerLaunch worker;
  std::string bin_dir;
  bool insecure = false;
  std::string ports_file;
  double wait_seconds = 0;
};

// The flags both daemons share, bound to `d`.
void AddDaemonFlags(CLI::App& cmd, launch::DaemonLaunch& d, LaunchFlags& f) {
  cmd.add_option("--bin-dir", f.bin_dir, "Where the daemons are (a build folder, or a folder holding them)");
  cmd.add_option("--job", d.job_path, "Job spec YAML");
  cmd.add_option("--set", d.overrides, "Job override key=value (repeatable)");
  cmd.add_option("--tls-dir", d.tls_dir, "Certificates folder (mutual TLS); without it, --insecure");
  cmd.add_flag("--insecure", f.insecure, "Plaintext (the default without --tls-dir)");
  cmd.add_option("--log-level", d.log_level, "The daemon's --log-level");
  cmd.add_option("--metrics-listen", d.metrics_listen, "The daemon's /metrics address");
  cmd.add_option("--port-file", d.port_file, "Where the daemon reports the ports it bound");
  cmd.add_option("--extra", d.extra, "A further flag for the daemon, as given (repeatable)")->allow_extra_args(false);
}

int PrintArgv(launch::Program program, LaunchFlags& f) {
  const std::string& tls_dir = program == launch::Program::kServer ? f.server.tls_dir : f.worker.tls_dir;
  if (f.insecure && !tls_dir.empty()) {  // plaintext is the default without --tls-dir: --insecure adds nothing
    std::fprintf(stderr, "sketchps launch: --insecure and --tls-dir: choose one (the daemons refuse both)\n");
    return 2;
  }
  auto binary = launch::FindBinary(program, f.bin_dir);
  if (!binary.ok()) {
    std::fprintf(stderr, "sketchps launch: %s\n", std::string(binary.status().message()).c_str());
    return 2;
  }
  if (program == launch::Program::kServer) {
    f.server.binary = *binary;
    std::printf("%s\n", nlohmann::json(launch::ServerArgv(f.server)).dump().c_str());
  } else {
    f.worker.binary = *binary;
    std::printf("%s\n", nlohmann::json(launch::WorkerArgv(f.worker)).dump().c_str());
  }
  return 0;
}

int PrintPorts(const LaunchFlags& f) {
  const absl::Time deadline = absl::Now() + absl::Seconds(f.wait_seconds);
  for (;;) {
    auto ports = ReadPortFile(f.ports_file);
    if (ports.ok()) {
      std::printf("%s", PortFileText(*ports).c_str());
      return 0;
    }
    if (ports.status().code() != absl::StatusCode::kNotFound) {
      std::fprintf(stderr, "sketchps launch ports: %s\n", std::string(ports.status().message()).c_str());
      return 2;
    }
    if (absl::Now() >= deadline) {
      std::fprintf(stderr, "sketchps launch ports: %s (after --wait %g s)\n",
                   std::string(ports.status().message()).c_str(), f.wait_seconds);
      return 1;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace

void AddLaunchCommand(CLI::App& app, std::function<int()>& run) {
  auto flags = std::make_shared<LaunchFlags>();
  CLI::App* cmd =
      app.add_subcommand("launch", "The daemons' command lines and ports, for harnesses in other languages");
  cmd->require_subcommand(1);
  CLI::App* argv = cmd->add_subcommand("argv", "Print a daemon's command line as a JSON array");
  argv->require_subcommand(1);
  CLI::App* server = argv->add_subcommand("server", "sketchps-server");
  AddDaemonFlags(*server, flags->server, *flags);
  server->add_option("--shard", flags->server.shard, "Shard id")->required();
  server->add_option("--listen", flags->server.listen, "gRPC address")->capture_default_str();
  server->add_option("--health-listen", flags->server.health_listen, "Plaintext health address");
  server->add_option("--checkpoint-dir", flags->server.checkpoint_dir, "Checkpoint folder");
  server->add_option("--checkpoint-key-file", flags->server.checkpoint_key_file, "The checkpoints' integrity key");
  server->add_option("--idle-exit-seconds", flags->server.idle_exit_seconds, "The shard's --idle-exit-seconds");
  server->callback([flags, &run] { run = [flags] { return PrintArgv(launch::Program::kServer, *flags); }; });
  CLI::App* worker = argv->add_subcommand("worker", "sketchps-worker");
  AddDaemonFlags(*worker, flags->worker, *flags);
  worker->add_option("--rank", flags->worker.rank, "This worker's rank")->required();
  worker->add_option("--world-size", flags->worker.world_size, "Number of workers")->required();
  worker->add_option("--servers", flags->worker.servers, "ps mode: the shards' addresses, in shard order")
      ->delimiter(',');
  worker->add_option("--listen", flags->worker.listen, "Decentralized: this worker's Peer service address");
  worker->add_option("--peers", flags->worker.peers, "Decentralized: every rank's address")->delimiter(',');
  worker->add_option("--peers-file", flags->worker.peers_file, "Decentralized: a file with every rank's address");
  worker->add_option("--peer-timeout-seconds", flags->worker.peer_timeout_seconds, "Decentralized: peer timeout");
  worker->add_option("--metrics-out", flags->worker.metrics_out, "One JSON line per round");
  worker->add_option("--state-dir", flags->worker.state_dir, "ps mode: the schemes' state across restarts");
  worker->add_option("--checkpoint-key-file", flags->worker.checkpoint_key_file, "The state files' integrity key");
  worker->add_option("--threads", flags->worker.threads, "Threads")->capture_default_str();
  worker->callback([flags, &run] { run = [flags] { return PrintArgv(launch::Program::kWorker, *flags); }; });
  CLI::App* ports = cmd->add_subcommand("ports", "Print a daemon's port file (its bound ports) as JSON");
  ports->add_option("file", flags->ports_file, "The daemon's --port-file")->required();
  ports->add_option("--wait", flags->wait_seconds, "Wait this long for the file to appear")->capture_default_str();
  ports->callback([flags, &run] { run = [flags] { return PrintPorts(*flags); }; });
}

}  // namespace sketchps::tools
