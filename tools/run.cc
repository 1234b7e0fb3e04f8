#include "tools/run.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/rendezvous_file.h"
#include "common/status.h"
#include "job/job_spec.h"
#include "tools/certs.h"
#include "tools/plot.h"
#include "tools/preflight.h"
#include "tools/previous_run.h"
#include "common/process.h"
#include "tools/progress.h"
#include "tools/summary.h"

namespace sketchps::tools {
namespace fs = std::filesystem;
namespace {

absl::StatusOr<std::string> FindBinary(const std::string& bin_dir, const std::string& name, const std::string& folder) {
  std::vector<fs::path> candidates;
  if (!bin_dir.empty()) {
    candidates.push_back(fs::path(bin_dir) / name);
  } else {
    const fs::path self = fs::path(SelfExecutable()).parent_path();
    candidates = {self / name, self.parent_path() / folder / name};
  }
  for (const auto& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return c.string();
  }
  std::vector<std::string> tried;
  for (const auto& c : candidates) tried.push_back(c.string());
  return absl::NotFoundError(absl::StrCat(name, " not found (tried ", absl::StrJoin(tried, ", "), "); use --bin-dir"));
}

// OpenMP reads its settings once, when the runtime loads, and threads that a process starts later
// (gRPC handlers, the worker's per-shard threads) start from them, not from omp_set_num_threads. Busy-
// waiting OpenMP threads in several processes on a few cores would starve each other.
std::vector<std::string> ChildEnv(int threads) {
  return {absl::StrCat("OMP_NUM_THREADS=", threads), "OMP_WAIT_POLICY=PASSIVE"};
}

constexpr std::size_t kLogLineWidth = 160;  // progress lines when stderr is not a terminal

double UnixSeconds() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

std::string DefaultOutDir(const std::string& job_id) {
  return absl::StrCat("runs/", job_id, "-", absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::LocalTimeZone()));
}

class Launch {
 public:
  Launch(RunOptions options, JobSpec job) : options_(std::move(options)), job_(std::move(job)) {}
  absl::Status Prepare();
  absl::Status StartServers();
  absl::Status StartWorkers();
  // 0 when every worker finished, 1 on a failure, 130 on a signal.
  int Monitor();
  absl::Status Finish();
  // Stops every process that still runs (SIGTERM, then SIGKILL after a grace period).
  void StopAll();
  // faults.json, when a process was killed or failed.
  void WriteFaults() const;
  // accuracy.png / .svg in the run directory; a failure is a warning.
  void WritePlots() const;

 private:
  bool decentralized() const { return job_.decentralized(); }
  fs::path CheckpointDir() const {
    return job_.checkpoint.dir.empty() ? out_ / "checkpoints" : fs::path(job_.checkpoint.dir);
  }
  std::vector<std::string> ServerArgv(std::uint32_t s) const;
  std::vector<std::string> WorkerArgv(std::uint32_t r, const std::vector<std::string>& addresses) const;
  ScriptWorker ScriptPlace(std::uint32_t r, const std::vector<std::string>& addresses) const;
  std::vector<std::string> TlsArgs() const;
  absl::Status StartServer(std::uint32_t s);
  absl::Status WaitReady(std::uint32_t s);
  absl::StatusOr<int> WaitForPort(Child& child, const fs::path& port_file);
  absl::Status PublishPeers();
  int Failed(Child& child, int status);
  void InjectFaults(std::uint64_t rounds_done);
  void ShowProgress(bool final);

  RunOptions options_;
  JobSpec job_;
  fs::path out_;
  std::string server_bin_, worker_bin_;
  std::vector<int> ports_;  // the servers' (ps) or the workers' Peer services' (decentralized)
  std::vector<Child> servers_, workers_;
  std::vector<KillSpec> kills_;
  std::vector<bool> kill_done_;
  std::set<std::uint32_t> killed_workers_;
  nlohmann::json faults_ = nlohmann::json::object();  // faults.json
  std::optional<Progress> progress_;
  std::optional<JsonLinesFollower> follower_;
  absl::Time start_ = absl::Now(), workers_start_, workers_end_;
  absl::Time last_print_ = absl::InfinitePast();
  worker::DatasetSizes data_;
  std::uint64_t printed_decile_ = 0;
  bool tty_ = isatty(STDERR_FILENO) == 1;
};

absl::Status Launch::Prepare() {
  for (const auto& k : options_.kills) {
    SKETCHPS_ASSIGN_OR_RETURN(KillSpec spec, ParseKillSpec(k));
    const bool server = spec.role == "server";
    if (server && decentralized())
      return absl::InvalidArgumentError("--kill: decentralized mode has no servers to kill");
    const std::uint32_t count = server ? job_.servers : job_.workers;
    if (spec.index >= count) {
      return absl::InvalidArgumentError(absl::StrCat("--kill ", k, ": the job has ", count, " ", spec.role, "s"));
    }
    kills_.push_back(spec);
  }
  kill_done_.assign(kills_.size(), false);
  SKETCHPS_ASSIGN_OR_RETURN(data_, CheckJobRunnable(job_));
  SKETCHPS_ASSIGN_OR_RETURN(server_bin_, FindBinary(options_.bin_dir, "sketchps-server", "server"));
  SKETCHPS_ASSIGN_OR_RETURN(worker_bin_, FindBinary(options_.bin_dir, "sketchps-worker", "worker"));
  out_ = options_.out.empty() ? DefaultOutDir(job_.job_id) : options_.out;
  SKETCHPS_ASSIGN_OR_RETURN(const auto resumed, CheckPreviousRun(out_, CheckpointDir(), job_, options_.resume));
  if (resumed) {
    std::fprintf(stderr, "run: resuming from the checkpoints in %s: round %llu of %llu\n", CheckpointDir().c_str(),
                 static_cast<unsigned long long>(*resumed), static_cast<unsigned long long>(job_.total_rounds()));
  }
  std::error_code ec;
  fs::create_directories(out_ / "checkpoints", ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--out ", out_.string(), ": ", ec.message()));
  std::ofstream(out_ / "job.yaml") << job_.effective_yaml;
  if (!options_.insecure) {
    SKETCHPS_RETURN_IF_ERROR(MakeCerts(CertsOptions{(out_ / "tls").string(), job_.workers, job_.servers, 30, true}));
  }
  // Every listener binds port 0 and reports the port it got: no port chosen in advance can be taken
  // by another process meanwhile. A restarted server binds the port it had.
  ports_.assign(decentralized() ? job_.workers : job_.servers, 0);
  progress_.emplace(
      ProgressPlan{job_.total_rounds(), job_.train.eval_every_rounds, job_.train.eval_samples, data_.test});
  follower_.emplace((out_ / "worker-0.jsonl").string());
  return absl::OkStatus();
}

std::vector<std::string> Launch::TlsArgs() const {
  if (options_.insecure) return {"--insecure"};
  return {"--tls-dir", (out_ / "tls").string()};
}

std::vector<std::string> Launch::ServerArgv(std::uint32_t s) const {
  std::vector<std::string> argv{server_bin_,
                                "--job",
                                (out_ / "job.yaml").string(),
                                "--shard",
                                std::to_string(s),
                                "--listen",
                                absl::StrCat("127.0.0.1:", ports_[s]),
                                "--port-file",
                                (out_ / absl::StrCat("server-", s, ".port")).string(),
                                "--checkpoint-dir",
                                CheckpointDir().string(),
                                "--log-level",
                                options_.job.log_level};
  for (auto& a : TlsArgs()) argv.push_back(std::move(a));
  return argv;
}

absl::Status Launch::StartServer(std::uint32_t s) {
  fs::remove(out_ / absl::StrCat("server-", s, ".port"));
  SKETCHPS_ASSIGN_OR_RETURN(Child child,
                            Child::Start(absl::StrCat("server ", s), ServerArgv(s),
                                         (out_ / absl::StrCat("server-", s, ".log")).string(), ChildEnv(1)));
  if (s < servers_.size()) {
    servers_[s] = std::move(child);
  } else {
    servers_.push_back(std::move(child));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Launch::WaitForPort(Child& child, const fs::path& port_file) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!fs::exists(port_file)) {
    if (auto status = child.Poll()) {
      return absl::UnavailableError(absl::StrCat(child.name(), " exited with code ", *status,
                                                 " before listening; last log lines:\n", child.LogTail(10)));
    }
    if (absl::Now() > deadline)
      return absl::DeadlineExceededError(absl::StrCat(child.name(), " not listening after 60 s"));
    absl::SleepFor(absl::Milliseconds(20));
  }
  std::ifstream in(port_file);
  int port = 0;
  if (!(in >> port) || port <= 0) return absl::InternalError(absl::StrCat(port_file.string(), ": no port in it"));
  return port;
}

absl::Status Launch::WaitReady(std::uint32_t s) {
  SKETCHPS_ASSIGN_OR_RETURN(ports_[s], WaitForPort(servers_[s], out_ / absl::StrCat("server-", s, ".port")));
  return absl::OkStatus();
}

// Decentralized mode: once every worker's Peer service reports its port, every worker gets the list.
absl::Status Launch::PublishPeers() {
  std::vector<std::string> addresses;
  for (std::uint32_t r = 0; r < job_.workers; ++r) {
    SKETCHPS_ASSIGN_OR_RETURN(ports_[r], WaitForPort(workers_[r], out_ / absl::StrCat("worker-", r, ".port")));
    addresses.push_back(absl::StrCat("127.0.0.1:", ports_[r]));
  }
  return WriteFileAtomically((out_ / "peers.txt").string(), absl::StrJoin(addresses, ",") + "\n");
}

absl::Status Launch::StartServers() {
  if (decentralized()) return absl::OkStatus();  // the workers reach each other directly
  for (std::uint32_t s = 0; s < job_.servers; ++s) SKETCHPS_RETURN_IF_ERROR(StartServer(s));
  for (std::uint32_t s = 0; s < job_.servers; ++s) SKETCHPS_RETURN_IF_ERROR(WaitReady(s));
  std::fprintf(stderr, "run: %u servers serving on ports %s\n", job_.servers, absl::StrJoin(ports_, ", ").c_str());
  return absl::OkStatus();
}

std::vector<std::string> Launch::WorkerArgv(std::uint32_t r, const std::vector<std::string>& addresses) const {
  std::vector<std::string> argv{worker_bin_,
                                "--job",
                                (out_ / "job.yaml").string(),
                                "--rank",
                                std::to_string(r),
                                "--world-size",
                                std::to_string(job_.workers),
                                "--metrics-out",
                                (out_ / absl::StrCat("worker-", r, ".jsonl")).string(),
                                "--threads",
                                std::to_string(options_.worker_threads),
                                "--log-level",
                                options_.job.log_level};
  for (auto& a : TlsArgs()) argv.push_back(std::move(a));
  if (!options_.dump_rounds.empty()) {
    argv.insert(argv.end(), {"--dump-gradients", absl::StrJoin(options_.dump_rounds, ","), "--dump-dir",
                             (out_ / "gradients").string()});
  }
  if (decentralized()) {
    argv.insert(argv.end(),
                {"--listen", "127.0.0.1:0", "--port-file", (out_ / absl::StrCat("worker-", r, ".port")).string(),
                 "--peers-file", (out_ / "peers.txt").string()});
    if (options_.peer_timeout_seconds > 0) {
      argv.insert(argv.end(), {"--peer-timeout-seconds", absl::StrCat(options_.peer_timeout_seconds)});
    }
  } else {
    argv.insert(argv.end(), {"--servers", absl::StrJoin(addresses, ",")});
  }
  return argv;
}

ScriptWorker Launch::ScriptPlace(std::uint32_t r, const std::vector<std::string>& addresses) const {
  ScriptWorker w;
  w.rank = r;
  w.workers = job_.workers;
  w.job_path = (out_ / "job.yaml").string();
  w.metrics_out = (out_ / absl::StrCat("worker-", r, ".jsonl")).string();
  if (decentralized()) {
    w.listen = "127.0.0.1:0";
    w.port_file = (out_ / absl::StrCat("worker-", r, ".port")).string();
    w.peers_file = (out_ / "peers.txt").string();
    w.peer_timeout_seconds = options_.peer_timeout_seconds;
  } else {
    w.servers = absl::StrJoin(addresses, ",");
  }
  if (!options_.insecure) w.tls_dir = (out_ / "tls").string();
  return w;
}

absl::Status Launch::StartWorkers() {
  std::vector<std::string> addresses;
  for (int p : ports_) addresses.push_back(absl::StrCat("127.0.0.1:", p));
  workers_start_ = absl::Now();
  for (std::uint32_t r = 0; r < job_.workers; ++r) {
    std::vector<std::string> argv = WorkerArgv(r, addresses);
    std::vector<std::string> env = ChildEnv(options_.worker_threads);
    if (!options_.script.path.empty()) {
      argv = ScriptArgv(options_.script);
      for (auto& e : ScriptEnv(options_.script, ScriptPlace(r, addresses))) env.push_back(std::move(e));
    }
    SKETCHPS_ASSIGN_OR_RETURN(Child child, Child::Start(absl::StrCat("worker ", r), std::move(argv),
                                                        (out_ / absl::StrCat("worker-", r, ".log")).string(), env));
    workers_.push_back(std::move(child));
  }
  progress_->SetStatus(absl::StrCat(job_.workers, " workers starting (loading data, ",
                                    decentralized() ? "reaching their peers)" : "joining the servers)"));
  if (decentralized()) SKETCHPS_RETURN_IF_ERROR(PublishPeers());
  std::fprintf(stderr, "run: %u workers training %s with %s for %llu rounds (%.2f epochs); logs in %s\n", job_.workers,
               job_.model.c_str(), job_.scheme.name.c_str(), static_cast<unsigned long long>(job_.total_rounds()),
               static_cast<double>(job_.total_rounds()) / job_.rounds_per_epoch(), out_.c_str());
  return absl::OkStatus();
}

int Launch::Failed(Child& child, int status) {
  std::fprintf(stderr, "\nrun: %s exited with code %d; last log lines (%s):\n%s\n", child.name().c_str(), status,
               child.log_path().c_str(), child.LogTail(10).c_str());
  faults_["first_failure"] = {{"process", child.name()},
                              {"code", status},
                              {"at", UnixSeconds()},
                              {"rank0_rounds", progress_->rounds_done()},
                              {"log_tail", child.LogTail(5)}};
  return 1;
}

void Launch::WriteFaults() const {
  if (!faults_.empty()) std::ofstream(out_ / "faults.json") << faults_.dump(2) << "\n";
}

void Launch::InjectFaults(std::uint64_t rounds_done) {
  for (std::size_t i = 0; i < kills_.size(); ++i) {
    if (kill_done_[i] || rounds_done < kills_[i].after_round) continue;
    kill_done_[i] = true;
    const bool server = kills_[i].role == "server";
    Child& victim = server ? servers_[kills_[i].index] : workers_[kills_[i].index];
    std::fprintf(stderr, "\nrun: fault injection: SIGKILL %s after round %llu%s\n", victim.name().c_str(),
                 static_cast<unsigned long long>(rounds_done), server ? ", restarting it" : "");
    faults_["kills"].push_back({{"process", victim.name()}, {"at", UnixSeconds()}, {"rank0_rounds", rounds_done}});
    victim.Signal(SIGKILL);
    while (!victim.Poll()) absl::SleepFor(absl::Milliseconds(5));
    if (!server) {
      killed_workers_.insert(kills_[i].index);
    } else if (auto st = StartServer(kills_[i].index); !st.ok()) {
      std::fprintf(stderr, "run: restart failed: %s\n", st.ToString().c_str());
    }
  }
}

void Launch::ShowProgress(bool final) {
  for (const auto& r : follower_->ReadNew()) {
    progress_->Add(r);
    // A record of this run (a resumed run's file starts with the earlier ones) ends the start-up.
    if (r.value("time", 0.0) >= absl::ToDoubleSeconds(workers_start_ - absl::UnixEpoch())) progress_->SetStatus("");
  }
  if (final) {
    progress_->SetStatus("");
  } else if (progress_->rounds_done() >= job_.total_rounds()) {
    progress_->SetStatus("workers leaving the job");
  }
  if (!options_.progress) return;
  const std::uint64_t decile = job_.total_rounds() > 0 ? progress_->rounds_done() * 10 / job_.total_rounds() : 0;
  if (tty_) {
    // Redrawn in place, one column short of the terminal's width so that it never wraps.
    if (final || absl::Now() - last_print_ > absl::Milliseconds(250)) {
      const std::size_t width = std::max<std::size_t>(20, TerminalWidth(STDERR_FILENO) - 1);
      std::fprintf(stderr, "\r%s\x1b[K", progress_->Line(width).c_str());
      last_print_ = absl::Now();
    }
    if (final) std::fprintf(stderr, "\n");
  } else if (final || decile > printed_decile_ || absl::Now() - last_print_ > absl::Seconds(30)) {
    std::fprintf(stderr, "%s\n", progress_->Line(kLogLineWidth).c_str());
    printed_decile_ = decile;
    last_print_ = absl::Now();
  }
}

int Launch::Monitor() {
  for (;;) {
    if (const std::string sig = PendingTerminationSignal(); !sig.empty()) {
      std::fprintf(stderr, "\nrun: %s: stopping every process\n", sig.c_str());
      return 130;
    }
    for (auto& s : servers_) {
      // A shard exits 0 by itself once every worker has left the job (Leave).
      if (auto status = s.Poll(); status && *status != 0) return Failed(s, *status);
    }
    bool all_done = true;
    for (std::uint32_t r = 0; r < workers_.size(); ++r) {
      if (killed_workers_.contains(r)) continue;  // killed on purpose
      const auto status = workers_[r].Poll();
      if (status && *status != 0) return Failed(workers_[r], *status);
      all_done &= status.has_value();
    }
    ShowProgress(all_done);
    InjectFaults(progress_->rounds_done());
    if (all_done) {
      workers_end_ = absl::Now();
      return 0;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

void Launch::StopAll() {
  for (auto& w : workers_) w.Stop(absl::Seconds(5));
  for (auto& s : servers_) s.Stop(absl::Seconds(15));
}

absl::Status Launch::Finish() {
  for (auto& s : servers_) {
    // Servers exit 0 by themselves once every worker has left; one still running is stopped with
    // SIGTERM, drains, checkpoints and exits 143. Anything else is a failure of the run.
    if (const int status = s.Stop(absl::Seconds(15)); status != 0 && status != 143) {
      return absl::InternalError(absl::StrCat(s.name(), " did not stop cleanly on SIGTERM (exit code ", status,
                                              "); last log lines:\n", s.LogTail(10)));
    }
  }
  std::vector<std::vector<nlohmann::json>> metrics;
  for (std::uint32_t r = 0; r < job_.workers; ++r) {
    SKETCHPS_ASSIGN_OR_RETURN(auto records, ReadJsonLines((out_ / absl::StrCat("worker-", r, ".jsonl")).string()));
    metrics.push_back(std::move(records));
  }
  const fs::path reporter = out_ / absl::StrCat("worker-", ReportingRank(metrics), ".jsonl");
  fs::copy_file(reporter, out_ / "metrics.jsonl", fs::copy_options::overwrite_existing);
  RunFacts facts;
  facts.scheme = job_.scheme.name;
  facts.model = job_.model;
  facts.workers = job_.workers;
  facts.servers = decentralized() ? 0u : job_.servers;
  facts.density = job_.scheme.density;
  facts.rounds_per_epoch = job_.rounds_per_epoch();
  facts.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  facts.train_seconds = absl::ToDoubleSeconds(workers_end_ - workers_start_);
  facts.job_id = job_.job_id;
  facts.mode = ModeName(job_.mode);
  facts.learning_rate = job_.optimizer.lr.base_lr;
  facts.momentum = job_.optimizer.momentum;
  facts.batch_size = job_.data.batch_size;
  facts.faults = faults_;
  facts.date = UtcNow();
  facts.machine = ThisMachine();
  if (decentralized()) {
    facts.peer = {{"timeout_seconds",
                   options_.peer_timeout_seconds > 0 ? options_.peer_timeout_seconds : job_.peer.timeout_seconds},
                  {"on_failure", job_.peer.on_failure == OnPeerFailure::kRegroup ? "regroup" : "stop"}};
  }
  SKETCHPS_ASSIGN_OR_RETURN(nlohmann::json summary, Summarize(facts, metrics));
  std::ofstream(out_ / "summary.json") << summary.dump(2) << "\n";
  std::fprintf(stderr,
               "run: done in %.1f s: test accuracy %s, %.0f bytes up and %.0f down per worker per round (%.1fx / %.1fx "
               "less than dense)\n",
               facts.wall_seconds, summary["final_test_accuracy"].dump().c_str(),
               summary["bytes_up_per_worker_per_round"].get<double>(),
               summary["bytes_down_per_worker_per_round"].get<double>(), summary["compression_ratio_up"].get<double>(),
               summary["compression_ratio_down"].get<double>());
  if (options_.plots) WritePlots();
  std::printf("%s\n", (out_ / "summary.json").c_str());
  return absl::OkStatus();
}

void Launch::WritePlots() const {
  if (auto st = tools::WritePlots({out_.string()}, (out_ / "accuracy").string()); !st.ok()) {
    std::fprintf(stderr, "run: no accuracy plots: %s\n", std::string(st.message()).c_str());
  }
}

}  // namespace

absl::StatusOr<KillSpec> ParseKillSpec(const std::string& text) {
  const std::vector<std::string> at = absl::StrSplit(text, '@');
  const std::vector<std::string> who = absl::StrSplit(at[0], ':');
  KillSpec spec;
  if (at.size() != 2 || who.size() != 2 || (who[0] != "server" && who[0] != "worker") ||
      !absl::SimpleAtoi(who[1], &spec.index) || !absl::SimpleAtoi(at[1], &spec.after_round)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kill '", text, "': expected server:<index>@<round> or worker:<index>@<round>"));
  }
  spec.role = who[0];
  return spec;
}

// The job, with the keys a --script defines (tools/run_script.h) as further overrides.
static absl::StatusOr<JobSpec> LoadScriptJob(const RunOptions& options) {
  SKETCHPS_ASSIGN_OR_RETURN(JobSpec job, LoadJobSpec(options.job.job_path, options.job.overrides));
  if (options.script.path.empty()) return job;
  if (!options.dump_rounds.empty()) return absl::InvalidArgumentError("--dump-gradients: not with --script");
  SKETCHPS_ASSIGN_OR_RETURN(auto keys, DescribeScript(options.script, job.effective_yaml, job.workers));
  std::vector<std::string> overrides = options.job.overrides;
  overrides.insert(overrides.end(), keys.begin(), keys.end());
  return LoadJobSpec(options.job.job_path, overrides);
}

int RunJob(const RunOptions& options) {
  BlockTerminationSignals();
  auto job = LoadScriptJob(options);
  if (!job.ok()) {
    std::fprintf(stderr, "sketchps run: %s\n", std::string(job.status().message()).c_str());
    return 2;
  }
  Launch launch(options, *job);
  if (auto st = launch.Prepare(); !st.ok()) {
    std::fprintf(stderr, "sketchps run: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  for (auto step : {&Launch::StartServers, &Launch::StartWorkers}) {
    if (auto st = (launch.*step)(); !st.ok()) {
      std::fprintf(stderr, "sketchps run: %s\n", std::string(st.message()).c_str());
      launch.StopAll();
      return 1;
    }
  }
  const int code = launch.Monitor();
  launch.WriteFaults();
  if (code != 0) {
    launch.StopAll();
    return code;
  }
  if (auto st = launch.Finish(); !st.ok()) {
    std::fprintf(stderr, "sketchps run: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace sketchps::tools
