#include "bench/loadgen/config_run.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/loadgen/collect.h"
#include "bench/loadgen/counting_aggregator.h"
#include "bench/loadgen/gradient_dumps.h"
#include "bench/loadgen/server_fleet.h"
#include "bench/loadgen/transports.h"
#include "bench/loadgen/tree_peers.h"
#include "common/config/cli.h"
#include "common/status.h"
#include "common/wire/layout_proto.h"
#include "engine/replica.h"
#include "kernels/backend.h"

namespace sketchps::bench {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// How long a round may go on after a stop was asked before the servers are stopped under it.
constexpr auto kStopGrace = std::chrono::seconds(60);

class ConfigRun {
 public:
  explicit ConfigRun(const ConfigSpec& spec) : spec_(spec), parent_(getppid()) {}

  absl::StatusOr<Measurement> Run();

 private:
  struct Worker {
    std::uint32_t rank = 0;
    std::unique_ptr<Transport> transport;
    std::unique_ptr<CountingAggregator> counting;
    std::unique_ptr<Replica> replica;
    kernels::DeviceArray<float> params, grad;  // in the kernels' memory (a GPU's with CUDA kernels)
    std::vector<float> host_grad;              // the round's synthetic or replayed gradient, before its copy
    WorkerWindow window;
  };
  // The barrier's completion step: runs on the last thread to arrive, while the others wait.
  struct Completion {
    ConfigRun* run;
    void operator()() noexcept { run->OnBarrier(); }
  };
  using Barrier = std::barrier<Completion>;
  enum class Next { kJoined, kBeforeRound, kAfterRound };

  std::uint64_t total_rounds() const { return spec_.warmup_rounds + spec_.rounds; }
  void Progress(const std::string& line) const {
    if (spec_.progress) spec_.progress(absl::StrCat(ConfigName(spec_), ": ", line));
  }
  absl::Status Prepare();
  absl::Status LoadGradients();
  absl::Status StartTransports();
  absl::Status MakeReplicas();
  void RunWorkers();
  void WorkerMain(Worker& me, Barrier& barrier);
  absl::Status WorkerRounds(Worker& me, Barrier& barrier);
  void Gradient(std::uint32_t rank, std::uint64_t round, std::vector<float>& out) const;
  void OnBarrier() noexcept;
  void AfterRound();
  void Snapshot(bool start);
  void Watch();
  void Fail(const absl::Status& status);
  absl::StatusOr<Measurement> Collect() const;

  // Constant after Prepare().
  const ConfigSpec& spec_;
  const pid_t parent_;
  JobSpec job_;
  LayerTable layers_;
  ShardMap shards_;
  std::unique_ptr<SyntheticGradients> synthetic_;
  std::optional<LoadedGradients> dumps_;

  std::unique_ptr<ServerFleet> fleet_;  // ps; owned by the calling thread (Scrape() from the barrier)
  std::vector<Worker> workers_;         // worker r's entry belongs to its thread while the rounds run

  // Lock-step state: written by OnBarrier (one thread, the others waiting), read after the barrier.
  Next next_ = Next::kJoined;
  Clock::time_point round_start_;
  std::vector<double> round_seconds_;
  bool stop_ = false;
  std::vector<ServerTotals> servers_start_, servers_end_;
  absl::Status scrape_error_;

  // Shared with the watchdog.
  std::atomic<std::uint64_t> round_{0};  // rounds completed
  std::atomic<std::uint32_t> done_{0};   // worker threads finished
  std::atomic<bool> stop_asked_{false};
  std::mutex error_mu_;
  absl::Status error_;  // the first failure (guarded by error_mu_)
};

void ConfigRun::Fail(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(error_mu_);
  if (error_.ok()) error_ = status;
  stop_asked_.store(true);
}

absl::Status ConfigRun::Prepare() {
  SKETCHPS_ASSIGN_OR_RETURN(job_, ConfigJob(spec_));
  layers_ = job_.layout;
  SKETCHPS_RETURN_IF_ERROR(LoadGradients());
  SKETCHPS_ASSIGN_OR_RETURN(shards_, MakeShardMap(layers_, spec_.servers));
  std::error_code ec;
  fs::create_directories(spec_.work_dir, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--work-dir ", spec_.work_dir, ": ", ec.message()));
  std::ofstream(fs::path(spec_.work_dir) / "job.yaml") << job_.effective_yaml;
  workers_.resize(spec_.workers);
  for (std::uint32_t r = 0; r < spec_.workers; ++r) {
    workers_[r].rank = r;
    workers_[r].params = kernels::DeviceArray<float>(layers_.dim());
    workers_[r].params.Zero();
    workers_[r].grad = kernels::DeviceArray<float>(layers_.dim());
    workers_[r].host_grad.assign(layers_.dim(), 0.0f);
  }
  return absl::OkStatus();
}

absl::Status ConfigRun::LoadGradients() {
  if (spec_.gradients_dir.empty()) {
    synthetic_ = std::make_unique<SyntheticGradients>(SyntheticOptions{layers_.dim(), spec_.correlation, spec_.seed});
    return absl::OkStatus();
  }
  SKETCHPS_ASSIGN_OR_RETURN(dumps_, LoadGradientDumps(spec_.gradients_dir));
  if (!SameLayers(dumps_->layers, layers_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gradients ", spec_.gradients_dir, ": the dumps' layer table is not model ", spec_.model, "'s"));
  }
  return absl::OkStatus();
}

absl::Status ConfigRun::StartTransports() {
  Transports transports;
  if (spec_.mode == "ps") {
    FleetOptions o{spec_.server_bin, spec_.work_dir, spec_.servers};
    SKETCHPS_ASSIGN_OR_RETURN(fleet_, ServerFleet::Start(o));
    SKETCHPS_ASSIGN_OR_RETURN(transports, ConnectWorkers(job_, fleet_->addresses()));
  } else if (spec_.scheme == kTreeVariant) {
    SKETCHPS_ASSIGN_OR_RETURN(transports, StartTreePeers(job_, shards_));
  } else {
    SKETCHPS_ASSIGN_OR_RETURN(transports, StartPeerWorkers(job_, shards_, spec_.work_dir));
  }
  for (std::uint32_t r = 0; r < spec_.workers; ++r) workers_[r].transport = std::move(transports[r]);
  return absl::OkStatus();
}

absl::Status ConfigRun::MakeReplicas() {
  for (auto& w : workers_) {
    w.counting = std::make_unique<CountingAggregator>(w.transport->aggregator(),
                                                      static_cast<std::uint32_t>(shards_.ranges.size()));
    ReplicaOptions o;
    o.worker_id = w.rank;
    o.num_workers = spec_.workers;
    o.shards = shards_;
    o.layers = layers_;
    o.make_scheme = job_.scheme.make;
    o.density = job_.scheme.density;
    o.global_momentum = job_.scheme.global_momentum;
    o.optimizer = job_.optimizer;
    o.seed = job_.train.seed;
    SKETCHPS_ASSIGN_OR_RETURN(w.replica, Replica::Create(o));
  }
  return absl::OkStatus();
}

void ConfigRun::Gradient(std::uint32_t rank, std::uint64_t round, std::vector<float>& out) const {
  if (dumps_) {
    const auto& g = dumps_->gradients[DumpIndex(round, rank, spec_.workers, dumps_->gradients.size())];
    std::copy(g.begin(), g.end(), out.begin());
  } else {
    synthetic_->Worker(rank, out);
  }
}

void ConfigRun::Snapshot(bool start) {
  for (auto& w : workers_) {
    WorkerSnapshot& s = start ? w.window.start : w.window.end;
    s.transport = w.transport->counters();
    s.phases = w.counting->Snapshot();
  }
  if (!fleet_) return;
  auto scraped = fleet_->Scrape();
  if (!scraped.ok()) {
    scrape_error_ = scraped.status();
  } else {
    (start ? servers_start_ : servers_end_) = *std::move(scraped);
  }
}

void ConfigRun::AfterRound() {
  const double dt = Seconds(Clock::now() - round_start_);
  const bool timed = round_.load() >= spec_.warmup_rounds;
  if (timed) round_seconds_.push_back(dt);
  const std::uint64_t completed = ++round_;
  if (completed == spec_.warmup_rounds) Snapshot(true);
  if (completed == total_rounds()) Snapshot(false);
  Progress(absl::StrFormat("round %d/%d%s %.3f s", completed, total_rounds(), timed ? "" : " (warm-up)", dt));
  if (completed < total_rounds() && synthetic_) synthetic_->BeginRound(completed);
}

void ConfigRun::OnBarrier() noexcept {
  try {
    switch (next_) {
      case Next::kJoined:
        Progress(absl::StrCat(spec_.workers, " workers ready; ", spec_.warmup_rounds, " warm-up + ", spec_.rounds,
                              " timed rounds"));
        if (spec_.warmup_rounds == 0) Snapshot(true);
        next_ = Next::kBeforeRound;
        break;
      case Next::kBeforeRound:
        round_start_ = Clock::now();
        next_ = Next::kAfterRound;
        break;
      case Next::kAfterRound:
        AfterRound();
        next_ = Next::kBeforeRound;
        break;
    }
  } catch (const std::exception& e) {
    Fail(absl::InternalError(absl::StrCat("barrier: ", e.what())));
  }
  if (stop_asked_.load()) stop_ = true;
}

absl::Status ConfigRun::WorkerRounds(Worker& me, Barrier& barrier) {
  // ps: join every shard (the shards assemble their state from the workers' offers); peers: compare
  // the job fingerprints.
  SKETCHPS_ASSIGN_OR_RETURN(const std::uint64_t first,
                            me.transport->Start(layers_, shards_, me.params.data(), *me.replica));
  if (first != 0) return absl::FailedPreconditionError(absl::StrCat("the job is at round ", first, ", not 0"));
  barrier.arrive_and_wait();  // joined
  for (std::uint64_t t = 0; t < total_rounds(); ++t) {
    if (stop_) return absl::OkStatus();  // the failure or stop is recorded already
    Gradient(me.rank, t, me.host_grad);
    me.grad.FromHost(me.host_grad);  // outside the measured window, like the gradient's computation
    barrier.arrive_and_wait();       // before the round
    auto round = me.replica->RunRound(*me.counting, RoundInfo{t, spec_.epoch}, me.grad.data(), me.params.data());
    if (!round.ok()) return Annotate(round.status(), absl::StrCat("round ", t));
    SKETCHPS_RETURN_IF_ERROR(me.transport->CheckReplica(t, shards_, me.params.data()));
    if (t >= spec_.warmup_rounds) me.window.selected += round->selected;
    barrier.arrive_and_wait();  // after the round
  }
  // The job is over for this worker: the shards exit once every worker has left.
  return me.transport->Finish(total_rounds());
}

void ConfigRun::WorkerMain(Worker& me, Barrier& barrier) {
#if defined(_OPENMP)
  omp_set_num_threads(1);  // P workers share the machine's cores, as P processes of one thread would
#endif
  if (absl::Status st = WorkerRounds(me, barrier); !st.ok()) {
    Fail(Annotate(st, absl::StrCat("worker ", me.rank)));
  }
  barrier.arrive_and_drop();
  done_.fetch_add(1);
}

// The calling thread's watch while the workers run: signals, the deadline, the parent's exit.
void ConfigRun::Watch() {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(spec_.timeout_seconds));
  std::optional<Clock::time_point> stop_since;
  while (done_.load() < spec_.workers) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (const std::string sig = PendingTerminationSignal(); !sig.empty()) {
      Fail(absl::CancelledError(absl::StrCat("interrupted by ", sig)));
    } else if (getppid() != parent_) {
      Fail(absl::CancelledError("the process that started this configuration exited"));
    } else if (Clock::now() > deadline) {
      Fail(absl::DeadlineExceededError(absl::StrFormat(
          "timed out after %.0f s with %d of %d rounds done (--timeout-seconds); stopped at the next round boundary",
          spec_.timeout_seconds, round_.load(), total_rounds())));
    }
    if (stop_asked_.load() && !stop_since) stop_since = Clock::now();
    // A round that does not end within kStopGrace of the stop: stop the servers so that it fails.
    if (stop_since && fleet_ && Clock::now() > *stop_since + kStopGrace) fleet_->Stop();
  }
}

void ConfigRun::RunWorkers() {
  if (synthetic_) synthetic_->BeginRound(0);
  Barrier barrier(static_cast<std::ptrdiff_t>(spec_.workers), Completion{this});
  std::vector<std::thread> threads;
  for (auto& w : workers_) threads.emplace_back([this, &w, &barrier] { WorkerMain(w, barrier); });
  Watch();
  for (auto& t : threads) t.join();
}

absl::StatusOr<Measurement> ConfigRun::Collect() const {
  MeasurementHeader h{spec_.mode,
                      spec_.scheme,
                      spec_.workers,
                      static_cast<std::uint32_t>(shards_.ranges.size()),
                      layers_.dim(),
                      spec_.density,
                      spec_.rounds,
                      round_seconds_,
                      spec_.stream_bytes_per_second};
  std::vector<WorkerWindow> windows;
  for (const auto& w : workers_) windows.push_back(w.window);
  return Assemble(h, windows, servers_start_, servers_end_);
}

absl::StatusOr<Measurement> ConfigRun::Run() {
  const Clock::time_point started = Clock::now();
  SKETCHPS_RETURN_IF_ERROR(Prepare());
  Progress(spec_.mode == "ps" ? absl::StrCat("starting ", spec_.servers, " servers and ", spec_.workers, " workers")
                              : absl::StrCat("starting ", spec_.workers, " peers"));
  SKETCHPS_RETURN_IF_ERROR(StartTransports());
  SKETCHPS_RETURN_IF_ERROR(MakeReplicas());
  RunWorkers();
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    SKETCHPS_RETURN_IF_ERROR(error_);
  }
  SKETCHPS_RETURN_IF_ERROR(scrape_error_);
  SKETCHPS_ASSIGN_OR_RETURN(Measurement m, Collect());
  workers_.clear();  // the workers' channels and peer services
  if (fleet_) SKETCHPS_RETURN_IF_ERROR(fleet_->AwaitExit(absl::Seconds(30)));
  Progress(absl::StrFormat("done in %.1f s", Seconds(Clock::now() - started)));
  return m;
}

}  // namespace

absl::StatusOr<Measurement> RunConfiguration(const ConfigSpec& spec) {
  ConfigRun run(spec);
  return run.Run();
}

}  // namespace sketchps::bench
