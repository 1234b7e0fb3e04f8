#include "bench/loadgen.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cli.h"
#include "common/gradient_dump.h"
#include "common/status.h"
#include "common/version.h"
#include "engine/replica.h"
#include "job/job_spec.h"
#include "kernels/backend.h"
#include "kernels/vector_ops.h"
#include "peer/peer_aggregator.h"
#include "peer/service.h"
#include "schemes/registry.h"
#include "spdlog/spdlog.h"
#include "tools/process.h"
#include "worker/peer_transport.h"
#include "worker/ps_transport.h"

namespace sketchps::bench {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kTreeVariant[] = "gtopk_tree";
constexpr std::uint32_t kPhaseSlots = 16;

std::string Num(double x) { return absl::StrFormat("%.17g", x); }

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// ---------------------------------------------------------------------------------------------
// Counting: the scheme's payloads and results per (shard, phase), as one worker sees them.

class CountingAggregator final : public Aggregator {
 public:
  CountingAggregator(Aggregator& inner, std::uint32_t shards) : inner_(inner), slots_(shards) {}

  absl::StatusOr<std::shared_ptr<const PhaseResult>> RunPhase(std::uint32_t shard, std::uint64_t round,
                                                              std::uint32_t phase, Contribution contribution) override {
    const bool contributed = contribution.payload.has_value();
    const std::uint64_t up = contributed ? RawPayloadBytes(*contribution.payload) : 0;
    auto result = inner_.RunPhase(shard, round, phase, std::move(contribution));
    if (result.ok() && shard < slots_.size() && phase < kPhaseSlots) {
      PhaseTotals& t = slots_[shard][phase];
      t.payload_bytes += up;
      t.contributions += contributed ? 1 : 0;
      t.result_bytes += RawPayloadBytes((*result)->value);
    }
    return result;
  }
  std::uint32_t worker_id() const override { return inner_.worker_id(); }
  std::uint32_t num_workers() const override { return inner_.num_workers(); }

  // Call between rounds.
  std::vector<std::array<PhaseTotals, kPhaseSlots>> Snapshot() const { return slots_; }

 private:
  Aggregator& inner_;
  std::vector<std::array<PhaseTotals, kPhaseSlots>> slots_;
};

// ---------------------------------------------------------------------------------------------
// Decentralized gTop-k with the tree merge: PeerServer + PeerAggregator with gtopk_tree (what
// worker::StartPeers builds, with the one option it does not expose).

class TreePeerTransport final : public worker::Transport {
 public:
  TreePeerTransport(std::unique_ptr<peer::PeerServer> server, std::unique_ptr<peer::PeerAggregator> aggregator)
      : server_(std::move(server)), aggregator_(std::move(aggregator)) {}
  ~TreePeerTransport() override {
    aggregator_.reset();
    server_->Shutdown();
  }
  absl::StatusOr<std::uint64_t> Start(const LayerTable&, const ShardMap&, float*, Replica&) override { return 0; }
  Aggregator& aggregator() override { return *aggregator_; }
  absl::Status CheckReplica(std::uint64_t, const ShardMap&, const float*) override { return absl::OkStatus(); }
  worker::TransportCounters counters() const override {
    const peer::PeerCounters c = aggregator_->counters();
    worker::TransportCounters out{c.wire_up, c.wire_down, true, c.raw_up, c.raw_down, {}};
    for (const auto& s : c.shards) out.seconds.push_back(s.seconds);
    return out;
  }

 private:
  std::unique_ptr<peer::PeerServer> server_;
  std::unique_ptr<peer::PeerAggregator> aggregator_;
};

// A currently free loopback TCP port (closed again before the caller binds it).
absl::StatusOr<int> FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  if (!ok) return absl::InternalError("cannot find a free loopback port");
  return ntohs(addr.sin_port);
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// ---------------------------------------------------------------------------------------------
// The job spec of one configuration.

absl::StatusOr<JobSpec> ConfigJob(const ConfigSpec& spec, const std::string& scheme) {
  const auto names = SchemeNames();
  std::vector<std::string> overrides;
  for (const auto& o : spec.overrides) {
    // scheme.<other scheme>.key=value applies to that scheme's configurations only.
    bool other = false;
    for (const auto& n : names) {
      if (n != scheme && absl::StartsWith(o, absl::StrCat("scheme.", n, "."))) other = true;
    }
    if (!other) overrides.push_back(o);
  }
  overrides.push_back(absl::StrCat("job_id=loadgen-", spec.mode, "-", spec.scheme, "-p", spec.workers));
  overrides.push_back(absl::StrCat("mode=", spec.mode));
  overrides.push_back(absl::StrCat("workers=", spec.workers));
  overrides.push_back(absl::StrCat("servers=", spec.servers));
  overrides.push_back(absl::StrCat("scheme.name=", scheme));
  overrides.push_back(absl::StrCat("scheme.density=", Num(spec.density)));
  return ParseJobSpec(DefaultJobSpecYaml(), "loadgen job", overrides);
}

// ---------------------------------------------------------------------------------------------
// One configuration.

class ConfigRun {
 public:
  explicit ConfigRun(const ConfigSpec& spec) : spec_(spec) {}
  ~ConfigRun() { StopServers(); }

  absl::StatusOr<Measurement> Run();

 private:
  struct Worker {
    std::uint32_t rank = 0;
    std::unique_ptr<worker::Transport> transport;
    std::unique_ptr<CountingAggregator> counting;
    std::unique_ptr<Replica> replica;
    std::vector<float> params, grad;
    std::uint64_t selected = 0;  // timed rounds
    worker::TransportCounters c0, c1;
    std::vector<std::array<PhaseTotals, kPhaseSlots>> p0, p1;
  };

  void Progress(const std::string& line) const {
    if (spec_.progress) spec_.progress(absl::StrCat(spec_.mode, " ", spec_.scheme, " P=", spec_.workers, ": ", line));
  }
  absl::Status Prepare();
  absl::Status StartServers();
  absl::Status StartPs();
  absl::Status StartPeers();
  absl::Status StartTreePeers();
  absl::Status MakeReplicas();
  void OnBarrier() noexcept;
  void Snapshot(bool start);
  void Fail(const absl::Status& status);
  void Gradient(std::uint32_t rank, std::uint64_t round, std::vector<float>& out) const;
  absl::StatusOr<std::vector<ServerTotals>> ScrapeServers() const;
  void StopServers();

  const ConfigSpec& spec_;
  std::string scheme_;  // the registered scheme (gtopk for gtopk_tree)
  JobSpec job_;
  ShardMap shards_;
  fs::path dir_;
  std::vector<tools::Child> servers_;
  std::vector<int> server_ports_, metrics_ports_;
  std::vector<Worker> workers_;
  std::unique_ptr<SyntheticGradients> synthetic_;
  std::optional<LoadedGradients> dumps_;

  // Lock-step state, written by OnBarrier (one thread at a time, between rounds) and read by the
  // workers after the barrier.
  enum class Next { kJoined, kBeforeRound, kAfterRound };
  Next next_ = Next::kJoined;
  std::atomic<std::uint64_t> round_{0};  // rounds completed (read by the watchdog)
  Clock::time_point round_start_;
  std::vector<double> round_seconds_;
  bool stop_ = false;
  std::atomic<bool> deadline_passed_{false};
  std::atomic<int> interrupted_{0};
  std::vector<ServerTotals> server0_, server1_;
  absl::Status scrape_error_;

  std::mutex error_mu_;
  absl::Status error_;
  std::atomic<bool> failed_{false};
};

void ConfigRun::Fail(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(error_mu_);
  if (error_.ok()) error_ = status;
  failed_.store(true);
}

absl::Status ConfigRun::Prepare() {
  if (spec_.workers == 0) return absl::InvalidArgumentError("--workers: must be >= 1");
  if (spec_.mode != "ps" && spec_.mode != "decentralized") {
    return absl::InvalidArgumentError(absl::StrCat("--mode: '", spec_.mode, "' is not ps or decentralized"));
  }
  scheme_ = spec_.scheme;
  if (scheme_ == kTreeVariant) {
    if (spec_.mode != "decentralized") {
      return absl::InvalidArgumentError("gtopk_tree: the tree merge is a decentralized-mode collective");
    }
    scheme_ = "gtopk";
  }
  SKETCHPS_ASSIGN_OR_RETURN(job_, ConfigJob(spec_, scheme_));
  LayerTable layers = spec_.layers;
  if (!spec_.gradients_dir.empty()) {
    SKETCHPS_ASSIGN_OR_RETURN(auto loaded, LoadGradientDumps(spec_.gradients_dir));
    layers = loaded.layers;
    dumps_ = std::move(loaded);
  } else {
    synthetic_ = std::make_unique<SyntheticGradients>(SyntheticOptions{layers.dim(), spec_.correlation, spec_.seed});
  }
  SKETCHPS_RETURN_IF_ERROR(ValidateLayerTable(layers));
  const std::uint32_t shards = spec_.mode == "ps" ? spec_.servers : std::max<std::uint32_t>(1, spec_.servers);
  SKETCHPS_ASSIGN_OR_RETURN(shards_, MakeShardMap(layers, shards));
  dir_ = spec_.work_dir;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--work-dir ", dir_.string(), ": ", ec.message()));
  std::ofstream(dir_ / "job.yaml") << job_.effective_yaml;
  workers_.resize(spec_.workers);
  for (std::uint32_t r = 0; r < spec_.workers; ++r) {
    workers_[r].rank = r;
    workers_[r].params.assign(layers.dim(), 0.0f);
    workers_[r].grad.assign(layers.dim(), 0.0f);
  }
  return absl::OkStatus();
}

absl::Status ConfigRun::StartServers() {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (std::uint32_t s = 0; s < spec_.servers; ++s) {
    const fs::path port_file = dir_ / absl::StrCat("server-", s, ".port");
    fs::remove(port_file);
    std::vector<std::string> argv{spec_.server_bin, "--job", (dir_ / "job.yaml").string(), "--shard", std::to_string(s),
                                  "--listen", "127.0.0.1:0", "--port-file", port_file.string(), "--metrics-listen",
                                  "127.0.0.1:0", "--max-wait-seconds", "60", "--log-level", "info"};
    SKETCHPS_ASSIGN_OR_RETURN(tools::Child child,
                              tools::Child::Start(absl::StrCat("server ", s), std::move(argv),
                                                  (dir_ / absl::StrCat("server-", s, ".log")).string(),
                                                  {"OMP_NUM_THREADS=1", "OMP_WAIT_POLICY=PASSIVE"}));
    servers_.push_back(std::move(child));
  }
  {
    std::ofstream pids(dir_ / "server.pids");
    for (const auto& c : servers_) pids << c.pid() << "\n";
  }
  const std::regex metrics_re("metrics on port ([0-9]+)");
  for (std::uint32_t s = 0; s < spec_.servers; ++s) {
    const fs::path port_file = dir_ / absl::StrCat("server-", s, ".port");
    int port = 0, metrics = 0;
    while (port == 0 || metrics == 0) {
      if (auto status = servers_[s].Poll()) {
        return absl::UnavailableError(absl::StrCat("server ", s, " exited with code ", *status,
                                                   " before serving; last log lines:\n", servers_[s].LogTail(10)));
      }
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat("server ", s, " not serving after 60 s; last log lines:\n",
                                                        servers_[s].LogTail(10)));
      }
      if (port == 0 && fs::exists(port_file)) absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(port_file)), &port);
      if (port != 0 && metrics == 0) {
        std::smatch m;
        const std::string log = ReadFile(servers_[s].log_path());
        if (std::regex_search(log, m, metrics_re)) absl::SimpleAtoi(m[1].str(), &metrics);
      }
      if (port == 0 || metrics == 0) absl::SleepFor(absl::Milliseconds(20));
    }
    server_ports_.push_back(port);
    metrics_ports_.push_back(metrics);
  }
  return absl::OkStatus();
}

absl::Status ConfigRun::StartPs() {
  SKETCHPS_RETURN_IF_ERROR(StartServers());
  std::vector<std::string> addresses;
  for (int p : server_ports_) addresses.push_back(absl::StrCat("127.0.0.1:", p));
  for (auto& w : workers_) {
    worker::ClientOptions o;
    o.job_id = job_.job_id;
    o.worker_id = w.rank;
    o.num_workers = spec_.workers;
    o.servers = addresses;
    o.rpc_timeout = absl::Seconds(30);
    o.patience = absl::Seconds(60);
    SKETCHPS_ASSIGN_OR_RETURN(w.transport, worker::ConnectParameterServers(std::move(o)));
  }
  return absl::OkStatus();
}

absl::Status ConfigRun::StartPeers() {
  absl::Status last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<std::string> peers;
    for (std::uint32_t r = 0; r < spec_.workers; ++r) {
      SKETCHPS_ASSIGN_OR_RETURN(int port, FreePort());
      peers.push_back(absl::StrCat("127.0.0.1:", port));
    }
    last = absl::OkStatus();
    for (auto& w : workers_) {
      worker::PeerOptions o{job_.job_id, w.rank, spec_.workers, peers[w.rank], peers, absl::Seconds(60), false};
      auto t = worker::StartPeers(o, shards_);
      if (!t.ok()) {
        last = t.status();
        break;
      }
      w.transport = *std::move(t);
    }
    if (last.ok()) return last;
    for (auto& w : workers_) w.transport.reset();  // a port was taken meanwhile: new ports, again
  }
  return last;
}

absl::Status ConfigRun::StartTreePeers() {
  std::vector<std::unique_ptr<peer::PeerServer>> servers;
  std::vector<std::string> peers;
  for (std::uint32_t r = 0; r < spec_.workers; ++r) {
    peer::PeerConfig c;
    c.job_id = job_.job_id;
    c.rank = r;
    c.num_workers = spec_.workers;
    for (const auto& range : shards_.ranges) c.range_lengths.push_back(range.size());
    c.gtopk_tree = true;
    c.peer_timeout = absl::Seconds(60);
    SKETCHPS_ASSIGN_OR_RETURN(auto server, peer::PeerServer::Start("127.0.0.1:0", c));
    peers.push_back(absl::StrCat("127.0.0.1:", server->port()));
    servers.push_back(std::move(server));
  }
  for (auto& w : workers_) {
    SKETCHPS_ASSIGN_OR_RETURN(auto agg, peer::PeerAggregator::Create(servers[w.rank]->endpoint(), peers));
    w.transport = std::make_unique<TreePeerTransport>(std::move(servers[w.rank]), std::move(agg));
  }
  return absl::OkStatus();
}

absl::Status ConfigRun::MakeReplicas() {
  const LayerTable& layers = dumps_ ? dumps_->layers : spec_.layers;
  for (auto& w : workers_) {
    w.counting = std::make_unique<CountingAggregator>(w.transport->aggregator(),
                                                      static_cast<std::uint32_t>(shards_.ranges.size()));
    ReplicaOptions o;
    o.worker_id = w.rank;
    o.num_workers = spec_.workers;
    o.shards = shards_;
    o.layers = layers;
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
    const auto& all = dumps_->gradients;
    const auto& g = all[(round * spec_.workers + rank) % all.size()];
    std::copy(g.begin(), g.end(), out.begin());
  } else {
    synthetic_->Worker(rank, out);
  }
}

absl::StatusOr<std::vector<ServerTotals>> ConfigRun::ScrapeServers() const {
  std::vector<ServerTotals> out;
  for (std::uint32_t s = 0; s < metrics_ports_.size(); ++s) {
    SKETCHPS_ASSIGN_OR_RETURN(std::string text, ScrapeMetrics(metrics_ports_[s]));
    const std::map<std::string, std::string> label{{"shard", std::to_string(s)}};
    SKETCHPS_ASSIGN_OR_RETURN(double in, PrometheusValue(text, "sketchps_bytes_in_total", label));
    SKETCHPS_ASSIGN_OR_RETURN(double outb, PrometheusValue(text, "sketchps_bytes_out_total", label));
    out.push_back(ServerTotals{in, outb});
  }
  return out;
}

void ConfigRun::Snapshot(bool start) {
  for (auto& w : workers_) {
    (start ? w.c0 : w.c1) = w.transport->counters();
    (start ? w.p0 : w.p1) = w.counting->Snapshot();
  }
  if (!metrics_ports_.empty()) {
    auto scraped = ScrapeServers();
    if (!scraped.ok()) {
      scrape_error_ = scraped.status();
    } else {
      (start ? server0_ : server1_) = *std::move(scraped);
    }
  }
}

// Runs on the last thread to arrive at a barrier, while every other worker waits.
void ConfigRun::OnBarrier() noexcept {
  try {
    const std::uint64_t total = spec_.warmup_rounds + spec_.rounds;
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
      case Next::kAfterRound: {
        const double dt = Seconds(Clock::now() - round_start_);
        const bool timed = round_.load() >= spec_.warmup_rounds;
        if (timed) round_seconds_.push_back(dt);
        const std::uint64_t completed = ++round_;
        if (completed == spec_.warmup_rounds) Snapshot(true);
        if (completed == total) Snapshot(false);
        Progress(absl::StrFormat("round %d/%d%s %.3f s", completed, total, timed ? "" : " (warm-up)", dt));
        if (completed < total && synthetic_) synthetic_->BeginRound(completed);
        next_ = Next::kBeforeRound;
        break;
      }
    }
    if (failed_.load() || deadline_passed_.load() || interrupted_.load()) stop_ = true;
  } catch (const std::exception& e) {
    Fail(absl::InternalError(absl::StrCat("barrier: ", e.what())));
    stop_ = true;
  }
}

void ConfigRun::StopServers() {
  for (std::uint32_t s = 0; s < servers_.size(); ++s) {
    if (servers_[s].Poll()) continue;
    servers_[s].Stop(absl::Seconds(20));
  }
}

absl::StatusOr<Measurement> ConfigRun::Run() {
  const Clock::time_point started = Clock::now();
  const auto deadline = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(spec_.timeout_seconds));
  SKETCHPS_RETURN_IF_ERROR(Prepare());
  Progress(spec_.mode == "ps" ? absl::StrCat("starting ", spec_.servers, " servers and ", spec_.workers, " workers")
                              : absl::StrCat("starting ", spec_.workers, " peers"));
  if (spec_.mode == "ps") {
    SKETCHPS_RETURN_IF_ERROR(StartPs());
  } else if (spec_.scheme == kTreeVariant) {
    SKETCHPS_RETURN_IF_ERROR(StartTreePeers());
  } else {
    SKETCHPS_RETURN_IF_ERROR(StartPeers());
  }
  SKETCHPS_RETURN_IF_ERROR(MakeReplicas());
  if (synthetic_) synthetic_->BeginRound(0);

  const std::uint64_t total = spec_.warmup_rounds + spec_.rounds;
  const LayerTable& layers = dumps_ ? dumps_->layers : spec_.layers;
  auto completion = [this]() noexcept { OnBarrier(); };
  std::barrier barrier(static_cast<std::ptrdiff_t>(spec_.workers), completion);
  std::atomic<std::uint32_t> done{0};
  std::vector<std::thread> threads;
  for (auto& w : workers_) {
    threads.emplace_back([&, wp = &w] {
      Worker& me = *wp;
#if defined(_OPENMP)
      omp_set_num_threads(1);
#endif
      auto fail = [&](const absl::Status& st) {
        Fail(absl::Status(st.code(), absl::StrCat("worker ", me.rank, ": ", st.message())));
        barrier.arrive_and_drop();
        done.fetch_add(1);
      };
      // ps: join every shard (the shards assemble their state from the workers' offers).
      auto first = me.transport->Start(layers, shards_, me.params.data(), *me.replica);
      if (!first.ok()) return fail(first.status());
      if (*first != 0) return fail(absl::FailedPreconditionError(absl::StrCat("the job is at round ", *first, ", not 0")));
      barrier.arrive_and_wait();  // joined
      for (std::uint64_t t = 0; t < total && !stop_; ++t) {
        Gradient(me.rank, t, me.grad);
        barrier.arrive_and_wait();  // before the round
        const RoundInfo info{t, spec_.epoch};
        auto round = me.replica->RunRound(*me.counting, info, me.grad.data(), me.params.data());
        if (!round.ok()) return fail(absl::Status(round.status().code(), absl::StrCat("round ", t, ": ", round.status().message())));
        if (auto st = me.transport->CheckReplica(t, shards_, me.params.data()); !st.ok()) return fail(st);
        if (t >= spec_.warmup_rounds) me.selected += round->selected;
        barrier.arrive_and_wait();  // after the round
      }
      barrier.arrive_and_drop();
      done.fetch_add(1);
    });
  }
  bool servers_stopped = false;
  std::optional<Clock::time_point> stop_asked;
  while (done.load() < spec_.workers) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (const std::string sig = PendingTerminationSignal(); !sig.empty() && !interrupted_.load()) {
      interrupted_.store(1);
      Fail(absl::CancelledError(absl::StrCat("interrupted by ", sig)));
      stop_asked = Clock::now();
    }
    if (Clock::now() > deadline && !deadline_passed_.load()) {
      deadline_passed_.store(true);
      Fail(absl::DeadlineExceededError(absl::StrFormat(
          "configuration timed out after %.0f s with %d of %d rounds done (--timeout-seconds); stopped at the next "
          "round boundary",
          spec_.timeout_seconds, round_.load(), total)));
      stop_asked = Clock::now();
    }
    // A round that does not end within a minute of the stop: stop the servers so that it fails.
    if (stop_asked && !servers_stopped && Clock::now() > *stop_asked + std::chrono::seconds(60)) {
      StopServers();
      servers_stopped = true;
    }
  }
  for (auto& t : threads) t.join();
  if (!error_.ok()) return error_;
  if (!scrape_error_.ok()) return scrape_error_;

  Measurement m;
  m.mode = spec_.mode;
  m.scheme = spec_.scheme;
  m.workers = spec_.workers;
  m.servers = static_cast<std::uint32_t>(shards_.ranges.size());
  m.dim = shards_.ranges.back().hi;
  m.density = spec_.density;
  m.rounds = spec_.rounds;
  m.round_seconds = round_seconds_;
  for (double s : round_seconds_) m.seconds += s;
  m.stream_bytes_per_second = spec_.stream_bytes_per_second;
  std::uint32_t phases = 0;
  for (const auto& w : workers_) {
    for (const auto& shard : w.p1) {
      for (std::uint32_t ph = 0; ph < kPhaseSlots; ++ph) {
        if (shard[ph].contributions > 0 || shard[ph].result_bytes > 0) phases = std::max(phases, ph + 1);
      }
    }
  }
  m.shard_phases.assign(shards_.ranges.size(), std::vector<PhaseTotals>(phases));
  for (const auto& w : workers_) {
    WorkerTotals t;
    t.wire_up = w.c1.wire_up - w.c0.wire_up;
    t.wire_down = w.c1.wire_down - w.c0.wire_down;
    for (std::size_t s = 0; s < shards_.ranges.size(); ++s) {
      for (std::uint32_t ph = 0; ph < phases; ++ph) {
        const PhaseTotals& a = w.p0[s][ph];
        const PhaseTotals& b = w.p1[s][ph];
        PhaseTotals& acc = m.shard_phases[s][ph];
        acc.payload_bytes += b.payload_bytes - a.payload_bytes;
        acc.result_bytes += b.result_bytes - a.result_bytes;
        acc.contributions += b.contributions - a.contributions;
        t.payload_up += b.payload_bytes - a.payload_bytes;
        t.payload_down += b.result_bytes - a.result_bytes;
      }
    }
    if (w.c1.counts_raw) {
      t.raw_up = w.c1.raw_up - w.c0.raw_up;
      t.raw_down = w.c1.raw_down - w.c0.raw_down;
    } else {
      t.raw_up = t.payload_up;
      t.raw_down = t.payload_down;
    }
    t.selected = w.selected;
    m.workers_totals.push_back(t);
  }
  for (std::size_t s = 0; s < server1_.size() && s < server0_.size(); ++s) {
    m.server_totals.push_back(ServerTotals{server1_[s].bytes_in - server0_[s].bytes_in,
                                           server1_[s].bytes_out - server0_[s].bytes_out});
  }
  // Stop the workers' transports, then the servers (they exit 0 on SIGTERM).
  workers_.clear();
  for (std::uint32_t s = 0; s < servers_.size(); ++s) {
    const std::optional<int> exited = servers_[s].Poll();
    const int code = exited ? *exited : servers_[s].Stop(absl::Seconds(20));
    if (code != 0) {
      return absl::InternalError(absl::StrCat("server ", s, " exited with code ", code, "; last log lines:\n",
                                              servers_[s].LogTail(10)));
    }
  }
  servers_.clear();
  Progress(absl::StrFormat("done in %.1f s", Seconds(Clock::now() - started)));
  return m;
}

}  // namespace

std::vector<std::string> DefaultSchemes() { return SchemeNames(); }

LayerTable CnnLayers() {
  return MakeLayerTable({{"conv1.weight", {32, 1, 3, 3}},
                         {"conv1.bias", {32}},
                         {"conv2.weight", {64, 32, 3, 3}},
                         {"conv2.bias", {64}},
                         {"fc1.weight", {64, 3136}},
                         {"fc1.bias", {64}},
                         {"fc2.weight", {10, 64}},
                         {"fc2.bias", {10}}});
}

LayerTable FlatLayers(std::uint64_t dim) { return MakeLayerTable({{"flat", {static_cast<std::int64_t>(dim)}}}); }

absl::StatusOr<Measurement> RunConfiguration(const ConfigSpec& spec) {
  ConfigRun run(spec);
  return run.Run();
}

absl::StatusOr<LoadedGradients> LoadGradientDumps(const std::string& dir) {
  const std::regex name_re("grad-r([0-9]+)-w([0-9]+)\\.skgd");
  std::vector<std::tuple<std::uint64_t, std::uint32_t, fs::path>> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, name_re)) continue;
    std::uint64_t round = 0;
    std::uint32_t worker = 0;
    if (!absl::SimpleAtoi(m[1].str(), &round) || !absl::SimpleAtoi(m[2].str(), &worker)) continue;
    files.emplace_back(round, worker, entry.path());
  }
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--gradients ", dir, ": ", ec.message()));
  if (files.empty()) return absl::InvalidArgumentError(absl::StrCat("--gradients ", dir, ": no grad-r*-w*.skgd files"));
  std::sort(files.begin(), files.end());
  LoadedGradients out;
  for (const auto& [round, worker, path] : files) {
    SKETCHPS_ASSIGN_OR_RETURN(GradientDump dump, ReadGradientDump(path.string()));
    if (out.gradients.empty()) {
      out.layers = dump.layers;
    } else if (dump.layers.dim() != out.layers.dim() || dump.layers.layers.size() != out.layers.layers.size()) {
      return absl::InvalidArgumentError(absl::StrCat("--gradients: ", path.string(), " has another layer table than ",
                                                     std::get<2>(files.front()).string()));
    }
    out.gradients.push_back(std::move(dump.values));
    out.origin.emplace_back(round, worker);
  }
  return out;
}

absl::StatusOr<double> StreamBytesPerSecond(std::size_t floats, int threads, int repeats) {
#if defined(_OPENMP)
  const int before = omp_get_max_threads();
  if (threads > 0) omp_set_num_threads(threads);
#else
  (void)threads;
#endif
  std::vector<float> host(floats);
  for (std::size_t i = 0; i < floats; ++i) host[i] = static_cast<float>(i % 1024) * 1e-3f - 0.5f;
  kernels::DeviceArray<float> x(host);
  kernels::Scratch scratch;
  const kernels::Exec exec{nullptr, &scratch};
  std::vector<double> times;
  absl::Status status;
  for (int i = 0; i <= repeats && status.ok(); ++i) {
    const auto start = Clock::now();
    auto sum = kernels::SumAbs(x.data(), floats, exec);
    kernels::Synchronize(exec);
    if (!sum.ok()) status = sum.status();
    if (i > 0) times.push_back(Seconds(Clock::now() - start));  // the first pass warms up
  }
#if defined(_OPENMP)
  omp_set_num_threads(before);
#endif
  SKETCHPS_RETURN_IF_ERROR(status);
  std::sort(times.begin(), times.end());
  return static_cast<double>(floats * sizeof(float)) / times[times.size() / 2];
}

// ---------------------------------------------------------------------------------------------
// The command.

namespace {

// Where sketchps-server is: --bin-dir, else next to this binary or in ../server (the build tree).
absl::StatusOr<std::string> FindServer(const std::string& bin_dir) {
  std::vector<fs::path> candidates;
  if (!bin_dir.empty()) {
    candidates.push_back(fs::path(bin_dir) / "sketchps-server");
  } else {
    const fs::path self = fs::path(tools::SelfExecutable()).parent_path();
    candidates = {self / "sketchps-server", self.parent_path() / "server" / "sketchps-server"};
  }
  for (const auto& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return c.string();
  }
  std::vector<std::string> tried;
  for (const auto& c : candidates) tried.push_back(c.string());
  return absl::NotFoundError(absl::StrCat("sketchps-server not found (tried ", absl::StrJoin(tried, ", "), "); use --bin-dir"));
}

std::string FirstLine(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, key)) {
      const auto colon = line.find(':');
      return std::string(absl::StripAsciiWhitespace(colon == std::string::npos ? line : line.substr(colon + 1)));
    }
  }
  return "";
}

nlohmann::json MachineInfo() {
  utsname u{};
  uname(&u);
  return nlohmann::json{{"cpu", FirstLine("/proc/cpuinfo", "model name")},
                        {"cores", std::thread::hardware_concurrency()},
                        {"memory", FirstLine("/proc/meminfo", "MemTotal")},
                        {"kernel", absl::StrCat(u.sysname, " ", u.release)},
                        {"hostname", u.nodename}};
}

std::string LoadAverage() {
  std::string s = ReadFile("/proc/loadavg");
  std::vector<std::string> f = absl::StrSplit(s, ' ');
  return f.size() >= 3 ? absl::StrCat(f[0], " ", f[1], " ", f[2]) : s;
}

std::string UtcNow() { return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()); }

absl::StatusOr<LayerTable> LayersOf(const LoadgenOptions& o) {
  if (o.layout == "cnn" || (o.layout == "auto" && o.dim == kCnnDim)) {
    if (o.dim != kCnnDim) return absl::InvalidArgumentError(absl::StrCat("--layout cnn: needs --dim ", kCnnDim));
    return CnnLayers();
  }
  if (o.layout != "flat" && o.layout != "auto") {
    return absl::InvalidArgumentError(absl::StrCat("--layout: '", o.layout, "' is not cnn, flat or auto"));
  }
  if (o.dim == 0) return absl::InvalidArgumentError("--dim: must be >= 1");
  return FlatLayers(o.dim);
}

std::string JobDescription(const LoadgenOptions& o, const LayerTable& layers) {
  const bool cnn = layers.layers.size() > 1 && layers.dim() == kCnnDim && o.gradients_dir.empty();
  std::string g = o.gradients_dir.empty()
                      ? absl::StrFormat("synthetic Student-t(3) gradients, correlation %.3g", o.correlation)
                      : absl::StrCat("real gradients from ", o.gradients_dir);
  return absl::StrFormat("%s d=%d, density %g, %d warm-up + %d timed rounds, %s", cnn ? "default job's CNN" : "flat vector",
                         layers.dim(), o.density, o.warmup_rounds, o.rounds, g);
}

ConfigSpec SpecOf(const LoadgenOptions& o, const LayerTable& layers, const std::string& mode, const std::string& scheme,
                  std::uint32_t workers) {
  ConfigSpec c;
  c.mode = mode;
  c.scheme = scheme;
  c.workers = workers;
  c.servers = o.servers;
  c.layers = layers;
  c.density = o.density;
  c.warmup_rounds = o.warmup_rounds;
  c.rounds = o.rounds;
  c.overrides = o.overrides;
  c.gradients_dir = o.gradients_dir;
  c.correlation = o.correlation;
  c.seed = o.seed;
  c.epoch = o.epoch;
  c.timeout_seconds = o.timeout_seconds;
  c.stream_bytes_per_second = o.stream_bytes_per_second;
  return c;
}

// --single mode:scheme:P: one configuration in this process; the result (or the error) as JSON.
int RunSingle(const LoadgenOptions& o) {
  BlockTerminationSignals();
  spdlog::set_level(spdlog::level::warn);
  std::vector<std::string> parts = absl::StrSplit(o.single, ':');
  std::uint32_t workers = 0;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[2], &workers)) {
    std::fprintf(stderr, "sketchps loadgen: --single '%s' is not mode:scheme:P\n", o.single.c_str());
    return 2;
  }
  auto layers = LayersOf(o);
  auto server = FindServer(o.bin_dir);
  nlohmann::json out{{"mode", parts[0]}, {"scheme", parts[1]}, {"workers", workers}};
  absl::Status status = !layers.ok() ? layers.status() : parts[0] == "ps" && !server.ok() ? server.status() : absl::OkStatus();
  if (status.ok()) {
    ConfigSpec spec = SpecOf(o, *layers, parts[0], parts[1], workers);
    spec.server_bin = server.ok() ? *server : "";
    spec.work_dir = o.work_dir;
    if (spec.work_dir.empty()) {
      std::string tmpl = (fs::temp_directory_path() / "sketchps-loadgen-XXXXXX").string();
      spec.work_dir = mkdtemp(tmpl.data()) != nullptr ? tmpl : fs::temp_directory_path().string();
    }
    spec.progress = [](const std::string& line) { std::fprintf(stderr, "loadgen: %s\n", line.c_str()); };
    auto m = RunConfiguration(spec);
    if (m.ok()) {
      auto f = Derive(*m);
      if (f.ok()) {
        out["result"] = ToJson(*m, *f);
      } else {
        status = f.status();
      }
    } else {
      status = m.status();
    }
  }
  if (!status.ok()) {
    out["error"] = std::string(status.message());
    std::fprintf(stderr, "loadgen: %s %s P=%u: error: %s\n", parts[0].c_str(), parts[1].c_str(), workers,
                 std::string(status.message()).c_str());
  }
  if (!o.out.empty()) {
    std::ofstream(o.out + ".tmp") << out.dump(2) << "\n";
    fs::rename(o.out + ".tmp", o.out);
  } else {
    std::cout << out.dump(2) << "\n";
  }
  return status.ok() ? 0 : 1;
}

int RunCalibrate(const LoadgenOptions& o, const LayerTable& layers) {
  constexpr std::uint32_t kWorkers = 4;
  nlohmann::json out{{"density", o.density}, {"workers", kWorkers}, {"servers", o.servers}};
  double target = kCalibrationUnionOverK;
  LayerTable table = layers;
  if (!o.gradients_dir.empty()) {
    auto dumps = LoadGradientDumps(o.gradients_dir);
    if (!dumps.ok()) {
      std::fprintf(stderr, "sketchps loadgen: %s\n", std::string(dumps.status().message()).c_str());
      return 2;
    }
    table = dumps->layers;
    auto shards = MakeShardMap(table, o.servers);
    if (!shards.ok()) {
      std::fprintf(stderr, "sketchps loadgen: %s\n", std::string(shards.status().message()).c_str());
      return 2;
    }
    // The workers of each dumped round.
    std::map<std::uint64_t, std::vector<std::vector<float>>> by_round;
    for (std::size_t i = 0; i < dumps->gradients.size(); ++i) by_round[dumps->origin[i].first].push_back(dumps->gradients[i]);
    nlohmann::json rounds = nlohmann::json::array();
    double sum = 0;
    int n = 0;
    for (auto& [round, grads] : by_round) {
      if (grads.size() < kWorkers) continue;
      grads.resize(kWorkers);
      const auto unions = TopKUnionPerShard(grads, *shards, o.density);
      nlohmann::json per_shard = nlohmann::json::array();
      for (std::size_t s = 0; s < unions.size(); ++s) {
        const double k = static_cast<double>(KOfRange(o.density, shards->ranges[s].size()));
        per_shard.push_back({{"union", unions[s]}, {"k", k}, {"union_over_k", unions[s] / k}});
        sum += unions[s] / k;
        ++n;
      }
      rounds.push_back({{"round", round}, {"shards", per_shard}});
    }
    out["real"] = {{"dir", o.gradients_dir}, {"rounds", rounds}};
    if (n > 0) {
      target = sum / n;
      out["real"]["union_over_k_mean"] = target;
    }
  }
  auto shards = MakeShardMap(table, o.servers);
  if (!shards.ok()) {
    std::fprintf(stderr, "sketchps loadgen: %s\n", std::string(shards.status().message()).c_str());
    return 2;
  }
  std::vector<double> grid;
  for (int i = 0; i <= 10; ++i) grid.push_back(i / 10.0);
  nlohmann::json curve = nlohmann::json::array();
  for (const auto& p : UnionCurve(grid, *shards, kWorkers, o.density, o.seed, 3)) {
    curve.push_back({{"correlation", p.correlation}, {"union_over_k", p.union_over_k}});
  }
  out["synthetic"] = curve;
  out["target_union_over_k"] = target;
  out["calibrated_correlation"] = CalibrateCorrelation(target, *shards, kWorkers, o.density, o.seed, 3);
  if (o.json) {
    std::cout << out.dump(2) << "\n";
  } else {
    if (out.contains("real")) {
      std::cout << "real gradients (" << o.gradients_dir << "), union of " << kWorkers << " workers' top-k per shard:\n";
      for (const auto& r : out["real"]["rounds"]) {
        std::cout << "  round " << r["round"];
        for (const auto& s : r["shards"]) std::cout << absl::StrFormat("  %d (%.2f k)", s["union"].get<std::uint64_t>(), s["union_over_k"].get<double>());
        std::cout << "\n";
      }
    }
    std::cout << "synthetic, union / k per shard at P = 4, density " << o.density << ":\n";
    for (const auto& p : curve) std::cout << absl::StrFormat("  correlation %.1f: %.3f\n", p["correlation"].get<double>(), p["union_over_k"].get<double>());
    std::cout << absl::StrFormat("target %.3f k: correlation %.3f\n", target, out["calibrated_correlation"].get<double>());
  }
  return 0;
}

std::string Table(const nlohmann::json& results) {
  std::string s = absl::StrFormat("%-14s %-13s %5s %12s %12s %12s %12s %14s %9s\n", "mode", "scheme", "P", "wire up",
                                  "wire down", "raw up", "raw down", "busiest link", "rounds/s");
  for (const auto& r : results) {
    const auto& b = r["per_worker_per_round"];
    s += absl::StrFormat("%-14s %-13s %5d %12.0f %12.0f %12.0f %12.0f %14.0f %9.2f\n", r["mode"].get<std::string>(),
                         r["scheme"].get<std::string>(), r["workers"].get<int>(), b["wire_up"].get<double>(),
                         b["wire_down"].get<double>(), b["raw_up"].get<double>(), b["raw_down"].get<double>(),
                         r["busiest_server_link_bytes_per_round"].get<double>(), r["rounds_per_second"].get<double>());
  }
  return s;
}

// Appends the new part of `path` (from *offset) to stderr.
void ForwardLog(const fs::path& path, std::uintmax_t* offset) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec || size <= *offset) return;
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(*offset));
  std::string chunk(size - *offset, '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  const auto last_newline = chunk.rfind('\n');
  if (last_newline == std::string::npos) return;
  std::fwrite(chunk.data(), 1, last_newline + 1, stderr);
  std::fflush(stderr);
  *offset += last_newline + 1;
}

void KillListedPids(const fs::path& pid_file) {
  std::ifstream in(pid_file);
  pid_t pid = 0;
  while (in >> pid) {
    if (pid > 1) kill(pid, SIGKILL);
  }
}

}  // namespace

CLI::App* AddLoadgenCommand(CLI::App& app, LoadgenOptions& o) {
  CLI::App* c = app.add_subcommand(
      "loadgen", "Measure every scheme's traffic against P: synthetic workers on the real servers and peer collectives");
  c->add_option("--mode", o.modes, "ps and/or decentralized (comma list)")
      ->delimiter(',')
      ->check(CLI::IsMember({"ps", "decentralized"}))
      ->capture_default_str();
  c->add_option("--workers", o.workers, "Values of P (repeatable or comma list)")->delimiter(',')->capture_default_str();
  c->add_option("--servers", o.servers, "Server shards S (ps; decentralized: the shard ranges)")->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  c->add_option("--schemes", o.schemes, "Comma list (default: all nine; gtopk_tree: gtopk with the peers' tree merge)")
      ->delimiter(',');
  c->add_option("--dim", o.dim, "Gradient length (220234: the default job's CNN)")->capture_default_str();
  c->add_option("--layout", o.layout, "cnn (the CNN's layer shapes), flat (one layer), auto (cnn iff --dim 220234)")
      ->capture_default_str();
  c->add_option("--density", o.density, "k / d per shard")->capture_default_str()->check(CLI::Range(1e-6, 1.0));
  c->add_option("--rounds", o.rounds, "Timed rounds per configuration")->capture_default_str()->check(CLI::Range(1, 100000));
  c->add_option("--warmup-rounds", o.warmup_rounds, "Untimed rounds before them")->capture_default_str();
  c->add_option("--set", o.overrides, "Job spec override key=value (repeatable; scheme.<name>.* only for that scheme)");
  c->add_option("--gradients", o.gradients_dir, "Directory of grad-r*-w*.skgd dumps, cycled over the workers");
  c->add_option("--bin-dir", o.bin_dir, "Directory holding sketchps-server (default: next to this binary)");
  c->add_option("--correlation", o.correlation, "Synthetic gradients: correlation between workers")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  c->add_option("--seed", o.seed, "Synthetic gradients' seed")->capture_default_str();
  c->add_option("--epoch", o.epoch, "Epoch every round reports (past DGC's and SDAGC's warm-up by default)")
      ->capture_default_str();
  c->add_option("--timeout-seconds", o.timeout_seconds, "Per configuration, setup included")->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_flag("--json", o.json, "Print the results as JSON (default: a table)");
  c->add_option("--out", o.out, "Write the results as JSON to this file");
  c->add_option("--work-dir", o.work_dir, "Job files and logs (default: a new directory in /tmp, removed on success)");
  c->add_flag("--calibrate", o.calibrate,
              "Print the union of 4 workers' top-k sets for the synthetic generator (and --gradients), no sweep");
  c->add_option("--single", o.single, "Internal: one configuration mode:scheme:P")->group("");
  c->add_option("--stream-bytes-per-second", o.stream_bytes_per_second, "Internal: the yardstick")->group("");
  return c;
}

int RunLoadgen(const LoadgenOptions& options) {
  if (!options.single.empty()) return RunSingle(options);
  BlockTerminationSignals();
  spdlog::set_level(spdlog::level::warn);
  auto layers = LayersOf(options);
  if (!layers.ok()) {
    std::fprintf(stderr, "sketchps loadgen: %s\n", std::string(layers.status().message()).c_str());
    return 2;
  }
  if (options.calibrate) return RunCalibrate(options, *layers);
  const std::vector<std::string> schemes = options.schemes.empty() ? DefaultSchemes() : options.schemes;
  for (const auto& s : schemes) {
    const auto names = SchemeNames();
    if (s != kTreeVariant && std::find(names.begin(), names.end(), s) == names.end()) {
      std::fprintf(stderr, "sketchps loadgen: --schemes: unknown scheme '%s' (known: %s, %s)\n", s.c_str(),
                   absl::StrJoin(names, ", ").c_str(), kTreeVariant);
      return 2;
    }
  }
  for (std::uint32_t p : options.workers) {
    if (p < 1 || p > 1024) {
      std::fprintf(stderr, "sketchps loadgen: --workers: %u is not in [1, 1024]\n", p);
      return 2;
    }
  }
  const bool any_ps = std::find(options.modes.begin(), options.modes.end(), "ps") != options.modes.end();
  std::string server_dir;
  if (any_ps) {
    auto server = FindServer(options.bin_dir);
    if (!server.ok()) {
      std::fprintf(stderr, "sketchps loadgen: %s\n", std::string(server.status().message()).c_str());
      return 2;
    }
    server_dir = fs::path(*server).parent_path().string();
  }
  fs::path work = options.work_dir;
  if (work.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "sketchps-loadgen-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::fprintf(stderr, "sketchps loadgen: cannot create a work directory in %s\n", fs::temp_directory_path().c_str());
      return 2;
    }
    work = tmpl;
  }
  std::error_code ec;
  fs::create_directories(work, ec);

  // The yardstick: one streaming pass (vectorized sum of |x|) over 128 MB, one thread (what a shard's
  // strand has: the servers run with OMP_NUM_THREADS=1) and every thread.
  std::fprintf(stderr, "loadgen: measuring the streaming-pass yardstick (128 MB)\n");
  const std::size_t kStreamFloats = 32u << 20;
  auto stream1 = StreamBytesPerSecond(kStreamFloats, 1);
  auto stream_all = StreamBytesPerSecond(kStreamFloats, 0);
  const double stream_bps = stream1.ok() ? *stream1 : 0.0;

  nlohmann::json doc{{"generator", "sketchps loadgen"},
                     {"version", Version()},
                     {"date", UtcNow()},
                     {"machine", MachineInfo()},
                     {"load_average_start", LoadAverage()},
                     {"job", JobDescription(options, *layers)},
                     {"options",
                      {{"modes", options.modes},
                       {"workers", options.workers},
                       {"servers", options.servers},
                       {"schemes", schemes},
                       {"dim", layers->dim()},
                       {"layers", layers->layers.size()},
                       {"density", options.density},
                       {"rounds", options.rounds},
                       {"warmup_rounds", options.warmup_rounds},
                       {"overrides", options.overrides},
                       {"gradients", options.gradients_dir},
                       {"correlation", options.correlation},
                       {"seed", options.seed},
                       {"epoch", options.epoch}}},
                     {"stream",
                      {{"floats", kStreamFloats},
                       {"bytes_per_second_1_thread", stream_bps},
                       {"bytes_per_second_all_threads", stream_all.ok() ? *stream_all : 0.0}}}};
  nlohmann::json results = nlohmann::json::array();
  nlohmann::json failures = nlohmann::json::array();

  struct Config {
    std::string mode, scheme;
    std::uint32_t workers;
  };
  std::vector<Config> configs;
  for (const auto& mode : options.modes) {
    for (const auto& scheme : schemes) {
      if (scheme == kTreeVariant && mode != "decentralized") continue;
      for (std::uint32_t p : options.workers) configs.push_back({mode, scheme, p});
    }
  }
  const auto sweep_start = Clock::now();
  bool interrupted = false;
  for (std::size_t i = 0; i < configs.size() && !interrupted; ++i) {
    const Config& c = configs[i];
    const std::string name = absl::StrCat(c.mode, "-", c.scheme, "-p", c.workers);
    const fs::path dir = work / name;
    fs::create_directories(dir, ec);
    fs::remove(dir / "result.json", ec);
    std::fprintf(stderr, "loadgen: [%zu/%zu] %s %s P=%u (%.0f s into the sweep)\n", i + 1, configs.size(), c.mode.c_str(),
                 c.scheme.c_str(), c.workers, Seconds(Clock::now() - sweep_start));
    std::vector<std::string> argv{tools::SelfExecutable(), "loadgen", "--single",
                                  absl::StrCat(c.mode, ":", c.scheme, ":", c.workers), "--servers",
                                  std::to_string(options.servers), "--dim", std::to_string(options.dim), "--layout",
                                  options.layout, "--density", Num(options.density), "--rounds",
                                  std::to_string(options.rounds), "--warmup-rounds", std::to_string(options.warmup_rounds),
                                  "--correlation", Num(options.correlation), "--seed", std::to_string(options.seed),
                                  "--epoch", Num(options.epoch), "--timeout-seconds", Num(options.timeout_seconds),
                                  "--work-dir", dir.string(), "--out", (dir / "result.json").string(),
                                  "--stream-bytes-per-second", Num(stream_bps)};
    if (!server_dir.empty()) argv.insert(argv.end(), {"--bin-dir", server_dir});
    if (!options.gradients_dir.empty()) argv.insert(argv.end(), {"--gradients", options.gradients_dir});
    for (const auto& o : options.overrides) argv.insert(argv.end(), {"--set", o});
    const fs::path log = dir / "loadgen.log";
    fs::remove(log, ec);
    auto child = tools::Child::Start(name, argv, log.string(), {"OMP_NUM_THREADS=1", "OMP_WAIT_POLICY=PASSIVE"});
    if (!child.ok()) {
      failures.push_back({{"mode", c.mode}, {"scheme", c.scheme}, {"workers", c.workers}, {"error", std::string(child.status().message())}});
      continue;
    }
    std::uintmax_t offset = 0;
    // The child stops itself at its deadline; this is the backstop for a child that cannot.
    const auto hard_deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(options.timeout_seconds + 180));
    std::optional<int> code;
    std::string killed;
    while (!(code = child->Poll())) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      ForwardLog(log, &offset);
      if (const std::string sig = PendingTerminationSignal(); !sig.empty()) {
        std::fprintf(stderr, "loadgen: %s: stopping the sweep\n", sig.c_str());
        interrupted = true;
        code = child->Stop(absl::Seconds(90));
        killed = absl::StrCat("interrupted by ", sig);
        break;
      }
      if (Clock::now() > hard_deadline) {
        code = child->Stop(absl::Seconds(5));
        killed = absl::StrFormat("did not stop %.0f s after its --timeout-seconds %.0f; killed", 180.0, options.timeout_seconds);
        break;
      }
    }
    ForwardLog(log, &offset);
    if (!killed.empty()) KillListedPids(dir / "server.pids");  // its servers, if it could not stop them
    nlohmann::json record;
    if (fs::exists(dir / "result.json")) {
      try {
        record = nlohmann::json::parse(ReadFile(dir / "result.json"));
      } catch (const std::exception& e) {
        record = {{"error", absl::StrCat("unreadable result: ", e.what())}};
      }
    }
    if (record.contains("result")) {
      results.push_back(record["result"]);
    } else {
      std::string error = record.contains("error") ? record["error"].get<std::string>()
                          : !killed.empty()        ? killed
                                                   : absl::StrCat("exited with code ", *code, " without a result");
      failures.push_back({{"mode", c.mode}, {"scheme", c.scheme}, {"workers", c.workers}, {"error", error},
                          {"log", log.string()}});
      std::fprintf(stderr, "loadgen: %s %s P=%u FAILED: %s (log: %s)\n", c.mode.c_str(), c.scheme.c_str(), c.workers,
                   error.c_str(), log.c_str());
    }
  }
  doc["results"] = results;
  doc["failures"] = failures;
  doc["load_average_end"] = LoadAverage();
  doc["sweep_seconds"] = Seconds(Clock::now() - sweep_start);
  if (!options.out.empty()) {
    std::ofstream out(options.out);
    out << doc.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "sketchps loadgen: --out %s: cannot write\n", options.out.c_str());
      return 2;
    }
  }
  if (options.json) {
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << Table(results);
  }
  const bool ok = failures.empty() && !interrupted;
  if (ok && options.work_dir.empty()) fs::remove_all(work, ec);
  if (!ok) std::fprintf(stderr, "loadgen: %zu configuration(s) failed; logs in %s\n", failures.size(), work.c_str());
  return interrupted ? 130 : ok ? 0 : 1;
}

}  // namespace sketchps::bench
