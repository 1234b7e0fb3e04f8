// sketchps-worker: one data-parallel worker.
//
//   parameter-server mode (job mode: ps):
//   sketchps-worker --job job.yaml --rank 0 --world-size 4 --servers host0:7070,host1:7070
//                   [--metrics-out FILE] [--metrics-listen HOST:PORT] [--patience-seconds 120] [--threads 1]
//                   [--state-dir DIR [--state-every-rounds 1]] [--set key=value]...
//   (--state-dir, else env SKETCHPS_STATE_DIR: the schemes' state after every round, restored when
//   the worker restarts, so a restart loses nothing: session/scheme_state_file.h; with
//   --checkpoint-key-file, else env SKETCHPS_CHECKPOINT_KEY_FILE, the files carry an integrity tag
//   under that key and a file whose tag is missing or wrong stops the worker)
//   decentralized mode (job mode: decentralized, or --set mode=decentralized):
//   sketchps-worker --job job.yaml --rank 0 --world-size 4 --listen 0.0.0.0:7080
//                   --peers host0:7080,host1:7080,host2:7080,host3:7080 [--peer-timeout-seconds S]
//   (the job's peer.timeout_seconds unless --peer-timeout-seconds is given; peer.on_failure: regroup
//   goes on with the survivors after a peer is lost, stop exits 1)
//
// Rank: --rank, else env RANK, else JOB_COMPLETION_INDEX (a Kubernetes Indexed Job). World size:
// --world-size, else env WORLD_SIZE, else the job's `workers` (they must agree). Servers: --servers,
// else env SKETCHPS_SERVERS (comma-separated in shard order, or one address with "{shard}" in it,
// expanded for every shard: "sketchps-server-{shard}.sketchps-server:7070"). Peers: --peers, else env
// SKETCHPS_PEERS (every rank's Peer address, in rank order); --listen, else env SKETCHPS_LISTEN.
//
//   sketchps-worker --job job.yaml --write-initial-weights FILE
// writes the initial weights this worker would train from (the job's built-in model and train.seed)
// to FILE as raw little-endian float32 in layer order, and exits (the Python tests start a Python
// model from them to compare both paths bit for bit).
//
// Exit codes: 0 trained; 1 runtime failure (e.g. servers unreachable for --patience-seconds);
// 2 bad configuration (a state file refused for its integrity tag too); 3 this replica diverged from
// the servers' master copy.
#include <malloc.h>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/config/cli.h"
#include "common/net/metrics_http.h"
#include "common/reason.h"
#include "common/status.h"
#include "common/wire/file_key.h"
#include "common/wire/framed_file.h"
#include "job/job_spec.h"
#include "kernels/backend.h"
#include "spdlog/spdlog.h"
#include "worker/models.h"
#include "worker/trainer.h"
#include "worker/worker_metrics.h"

namespace {

using namespace sketchps;

struct Flags {
  JobFlags job;
  std::optional<std::uint32_t> rank;
  std::optional<std::uint32_t> world_size;
  std::string servers;
  std::string metrics_out;
  std::string metrics_listen;
  std::string state_dir;
  std::string checkpoint_key_file;
  std::uint64_t state_every_rounds = 1;
  bool stop_on_state_error = false;
  std::optional<std::uint64_t> join_at_round;
  std::uint64_t leave_at_round = 0;
  std::string listen = "0.0.0.0:7080";
  std::string peers;
  std::string port_file;
  std::string peers_file;
  std::optional<double> peer_timeout_seconds;  // else the job's peer.timeout_seconds
  double patience_seconds = 120;
  double rpc_timeout_seconds = 20;
  int threads = 1;
  TlsFlags tls;
  bool no_overlap = false;
  std::vector<std::uint64_t> dump_rounds;
  std::string dump_dir;
  std::string initial_weights_out;
};

// --rank, else RANK, else JOB_COMPLETION_INDEX; --world-size, else WORLD_SIZE. Variables that are set
// must hold a non-negative integer.
absl::Status RankFromEnvironment(Flags& flags) {
  for (const char* name : {"RANK", "JOB_COMPLETION_INDEX"}) {
    SKETCHPS_ASSIGN_OR_RETURN(auto value, EnvUint32(name));
    if (!flags.rank) flags.rank = value;
  }
  SKETCHPS_ASSIGN_OR_RETURN(auto world, EnvUint32("WORLD_SIZE"));
  if (!flags.world_size) flags.world_size = world;
  if (!flags.rank)
    return absl::InvalidArgumentError("--rank: not given and neither RANK nor JOB_COMPLETION_INDEX is set");
  return absl::OkStatus();
}

// --write-initial-weights: the job's built-in model made with its train.seed, as Train makes it.
int WriteInitialWeights(const Flags& flags) {
  auto job = LoadJobSpec(flags.job.job_path, flags.job.overrides);
  if (!job.ok()) {
    std::fprintf(stderr, "sketchps-worker: bad job spec: %s\n", std::string(job.status().message()).c_str());
    return 2;
  }
  auto model = worker::Model::Create(job->model, job->train.seed);
  if (!model.ok()) {
    std::fprintf(stderr, "sketchps-worker: model: %s\n", std::string(model.status().message()).c_str());
    return 2;
  }
  const auto& flat = model->flat();
  std::ofstream out(flags.initial_weights_out, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(flat.params()), static_cast<std::streamsize>(flat.dim() * sizeof(float)));
  out.close();
  if (!out) {
    std::fprintf(stderr, "sketchps-worker: --write-initial-weights: cannot write %s\n",
                 flags.initial_weights_out.c_str());
    return 1;
  }
  return 0;
}

// The job's checks that this binary adds to the spec's own: exit code 2 (logged) or 0.
int CheckJob(const Flags& flags, const JobSpec& job) {
  if (job.optimizer.kind == OptimizerKind::kExternal) {
    spdlog::error(
        "optimizer.name: external is for workers that run a torch optimizer (the Python package); "
        "sketchps-worker applies the replicated optimizer: choose sgd, adam or adamw");
    return 2;
  }
  if (flags.world_size && *flags.world_size != job.workers) {
    spdlog::error("--world-size / WORLD_SIZE {} disagrees with the job's workers: {}", *flags.world_size, job.workers);
    return 2;
  }
  return 0;
}

// The trainer's options from the flags and the job (servers, key and TLS resolved): exit code 2
// (logged) or 0.
int MakeOptions(const Flags& flags, const JobSpec& job, worker::TrainerOptions& options) {
  options.job = job;
  options.rank = *flags.rank;
  if (!job.decentralized()) {
    auto servers = ServerAddresses(flags.servers, job.servers);
    if (!servers.ok()) {
      spdlog::error("{}", std::string(servers.status().message()));
      return 2;
    }
    options.servers = *std::move(servers);
  }
  options.listen = flags.listen;
  options.peers = absl::StrSplit(flags.peers, ',', absl::SkipEmpty());
  options.port_file = flags.port_file;
  options.peers_file = flags.peers_file;
  options.peer_timeout = absl::Seconds(flags.peer_timeout_seconds.value_or(job.peer.timeout_seconds));
  options.metrics_out = flags.metrics_out;
  options.state_dir = flags.state_dir;
  auto key = FileKey::LoadIfGiven(flags.checkpoint_key_file);
  if (!key.ok()) {
    spdlog::error("--checkpoint-key-file: {}", std::string(key.status().message()));
    return 2;
  }
  options.checkpoint_key = *std::move(key);
  options.state_every_rounds = flags.state_every_rounds;
  options.stop_on_state_error = flags.stop_on_state_error;
  options.join_at_round = flags.join_at_round;
  options.leave_at_round = flags.leave_at_round;
  options.patience = absl::Seconds(flags.patience_seconds);
  options.rpc_timeout = absl::Seconds(flags.rpc_timeout_seconds);
  options.overlap = !flags.no_overlap;
  auto tls = ResolveTls(flags.tls, Identity{Identity::Role::kWorker, *flags.rank});
  if (!tls.ok()) {
    spdlog::error("{}", std::string(tls.status().message()));
    return 2;
  }
  options.tls = *tls;
  options.dump_rounds = {flags.dump_rounds.begin(), flags.dump_rounds.end()};
  options.dump_dir = flags.dump_dir;
  return 0;
}

// The exit code of a training that failed with `status` (the header's table).
int TrainingExitCode(const absl::Status& status) {
  if (IsReplicaDivergence(status)) return 3;
  if (IsEvicted(status)) return 4;  // its peers refused its letter and go on without it
  // A state file refused for its integrity tag (tampered, or the key is missing or wrong): the
  // operator must act; a restart would meet the same file.
  if (IsKeyError(status)) return 2;
  // Configuration problems are permanent (exit 2: a Kubernetes Job does not retry them).
  return IsConfigurationError(status) ? 2 : 1;
}

int Run(Flags& flags) {
  auto job = LoadJobSpec(flags.job.job_path, flags.job.overrides);
  if (!job.ok()) {
    spdlog::error("bad job spec: {}", std::string(job.status().message()));
    return 2;
  }
  if (int code = CheckJob(flags, *job)) return code;
  worker::TrainerOptions options;
  if (int code = MakeOptions(flags, *job, options)) return code;
  worker::WorkerMetrics metrics(*flags.rank);
  std::optional<MetricsEndpoint> endpoint;
  if (!flags.metrics_listen.empty()) {
    auto served = worker::ServeWorkerMetrics(flags.metrics_listen, metrics);
    if (!served.ok()) {
      spdlog::error("{}", std::string(served.status().message()));
      return 1;
    }
    endpoint = std::move(*served);
    spdlog::info("metrics on port {}", endpoint->port);
  }
  options.metrics = &metrics;
  auto summary = worker::Train(options);
  if (!summary.ok()) {
    spdlog::error("training failed: {}", std::string(summary.status().message()));
    return TrainingExitCode(summary.status());
  }
  spdlog::info(
      "done: {} rounds from round {}{}", summary->rounds, summary->first_round,
      summary->final_test_accuracy ? absl::StrFormat(", final test accuracy %.4f", *summary->final_test_accuracy) : "");
  spdlog::info("final weights checksum {:016x}", summary->weights_checksum);
  if (summary->skipped.count() > 0) spdlog::warn("of its {} rounds, {}", summary->rounds, summary->skipped.Describe());
  return 0;
}

// The job, this worker's place in it (rank, world size) and whom it talks to (servers, or peers).
void AddPlacementFlags(CLI::App& app, Flags& flags) {
  AddJobFlags(app, flags.job);
  app.add_option("--rank", flags.rank, "This worker's rank (env RANK or JOB_COMPLETION_INDEX)");
  app.add_option("--world-size", flags.world_size, "Number of workers (env WORLD_SIZE; must equal the job's)");
  app.add_option(
         "--servers", flags.servers,
         "Server addresses host:port, comma-separated in shard order, or one with {shard} in it (ps-{shard}.ps:7070)")
      ->envname("SKETCHPS_SERVERS");
  app.add_option("--listen", flags.listen, "Decentralized mode: this worker's Peer service address")
      ->envname("SKETCHPS_LISTEN")
      ->capture_default_str();
  app.add_option("--peers", flags.peers,
                 "Decentralized mode: every rank's Peer address, comma-separated, in rank order")
      ->envname("SKETCHPS_PEERS");
  app.add_option("--port-file", flags.port_file,
                 "Decentralized mode: write the port the Peer service got here as JSON, {\"peer\": N} "
                 "(with --listen HOST:0; common/net/port_file.h)");
  app.add_option("--peers-file", flags.peers_file,
                 "Decentralized mode, instead of --peers: wait for this file "
                 "(every rank's address, comma-separated, in rank order)");
  app.add_option(
         "--peer-timeout-seconds", flags.peer_timeout_seconds,
         "Decentralized mode: a peer silent this long fails the round (default: the job's peer.timeout_seconds)")
      ->check(CLI::PositiveNumber);
}

// The records, the state directory and its key, elastic membership.
void AddStateFlags(CLI::App& app, Flags& flags) {
  app.add_option("--metrics-out", flags.metrics_out, "Append one JSON line per round to this file");
  app.add_option("--state-dir", flags.state_dir,
                 "ps mode: save the compression state here after every round and restore it on a restart "
                 "(one directory per worker or shared; files are named by rank)")
      ->envname("SKETCHPS_STATE_DIR");
  app.add_option("--checkpoint-key-file", flags.checkpoint_key_file,
                 "With --state-dir: a private key file (32+ bytes, mode 600); the state files carry an HMAC-SHA256 "
                 "integrity tag under it, and untagged or mistagged ones are refused")
      ->envname("SKETCHPS_CHECKPOINT_KEY_FILE");
  app.add_option(
         "--state-every-rounds", flags.state_every_rounds,
         "With --state-dir: save every N rounds (1: a restart loses nothing; the job's checkpoint.every_rounds: "
         "only a --resume from a shard checkpoint is exact, at a fraction of the writes)")
      ->envname("SKETCHPS_STATE_EVERY_ROUNDS")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--stop-on-state-error", flags.stop_on_state_error,
               "With --state-dir: a state file that cannot be written (a full disk) fails the next round "
               "(exit 1, naming the file) instead of a logged error and training on without it")
      ->envname("SKETCHPS_STOP_ON_STATE_ERROR");
  app.add_option("--join-at-round", flags.join_at_round,
                 "Elastic job (ps.elastic), a rank beyond ps.initial_workers: join the running job at this round "
                 "(default: as soon as the shards serve)");
  app.add_option("--leave-at-round", flags.leave_at_round,
                 "Elastic job (ps.elastic): leave the running job before this round (0: at its end)")
      ->capture_default_str();
}

// Metrics, patience and deadlines, TLS, the overlap, gradient dumps, the initial weights, threads.
void AddRunFlags(CLI::App& app, Flags& flags) {
  app.add_option("--metrics-listen", flags.metrics_listen,
                 "Prometheus /metrics address, e.g. 0.0.0.0:9090 (empty: off)");
  app.add_option("--patience-seconds", flags.patience_seconds, "Give up when a server stays unreachable this long")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--rpc-timeout-seconds", flags.rpc_timeout_seconds, "Deadline of one RPC attempt")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  AddTlsFlags(app, flags.tls);
  app.add_flag("--no-overlap", flags.no_overlap,
               "Start every shard's round after backward instead of as soon as its gradients exist");
  app.add_option("--dump-gradients", flags.dump_rounds,
                 "Write this worker's gradient of these rounds (comma-separated) "
                 "to --dump-dir, for `sketchps bench --input`")
      ->delimiter(',');
  app.add_option("--dump-dir", flags.dump_dir, "Folder for --dump-gradients files");
  app.add_option("--write-initial-weights", flags.initial_weights_out,
                 "Write the job's built-in model's initial weights (train.seed) to this file as raw float32 and exit");
  app.add_option("--threads", flags.threads, "Threads for libtorch and the kernels")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
}

// Whether the loaded kernels can serve this worker; when not, says why (main then exits 2).
bool BackendFits() {
  if (!sketchps::kernels::BackendRunsOrExplain("sketchps-worker")) return false;  // e.g. CUDA kernels, no device
  if (sketchps::kernels::ActiveBackend() == sketchps::kernels::Backend::kCuda) {
    // The model runs in Debian's libtorch, on the CPU: its buffers are host memory, which the CUDA
    // kernels cannot read. GPU workers are Python workers with a CUDA PyTorch (docs/gpu.md).
    std::fprintf(stderr,
                 "sketchps-worker: the CUDA kernels were loaded (%s), but this worker trains with libtorch on the "
                 "CPU; run it with the CPU kernels (lib/cuda off LD_LIBRARY_PATH), or train on the GPU with the "
                 "Python package (sketchps run --script, docs/gpu.md)\n",
                 sketchps::kernels::BackendDescription().c_str());
    return false;
  }
  return true;
}

// Logging, the rank from the environment, the allocator and the threads; then Run.
int SetUpAndRun(Flags& flags) {
  ConfigureLogging(flags.job, "worker ?");
  if (auto st = RankFromEnvironment(flags); !st.ok()) {
    spdlog::error("{}", std::string(st.message()));
    return 2;
  }
  ConfigureLogging(flags.job, "worker " + std::to_string(*flags.rank));
  spdlog::debug("open files limit {}", RaiseFileLimit());
  // Forward and backward allocate and free the same activation buffers every round. glibc returns
  // large blocks to the kernel (mmap / trim) and takes them back at the next round: hundreds of
  // thousands of page faults per epoch. Keep freed memory in the process instead.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  at::set_num_threads(flags.threads);
  omp_set_num_threads(flags.threads);
  return Run(flags);
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"sketchps-worker: one data-parallel worker (parameter-server or decentralized mode)"};
  AddPlacementFlags(app, flags);
  AddStateFlags(app, flags);
  AddRunFlags(app, flags);
  if (auto code = ParseCommandLine(app, argc, argv)) return *code;
  if (!flags.initial_weights_out.empty()) return WriteInitialWeights(flags);  // libtorch only, no kernels
  if (!BackendFits()) return 2;
  return SetUpAndRun(flags);
}
