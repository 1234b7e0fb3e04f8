#include "tools/run.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/file_write.h"
#include "common/net/rendezvous_file.h"
#include "common/status.h"
#include "common/wire/file_key.h"
#include "job/job_spec.h"
#include "launch/ports.h"
#include "tools/certs.h"
#include "tools/faults.h"
#include "tools/local_cluster.h"
#include "tools/plot.h"
#include "tools/preflight.h"
#include "tools/previous_run.h"
#include "tools/progress.h"
#include "tools/run_script.h"
#include "tools/scale_plan.h"
#include "tools/summary.h"
#include "tools/worker_watch.h"

namespace sketchps::tools {
namespace fs = std::filesystem;
namespace {

constexpr std::size_t kLogLineWidth = 160;  // progress lines when stderr is not a terminal

// "the disk holding <out> is full: ..." when the run directory's filesystem has less than 1% or
// 16 MiB left (a failure then most likely comes from there), else "".
std::string FullDisk(const fs::path& out) {
  struct statvfs disk {};
  if (statvfs(out.c_str(), &disk) != 0 || disk.f_blocks == 0) return "";
  const double total = static_cast<double>(disk.f_blocks) * disk.f_frsize;
  const double avail = static_cast<double>(disk.f_bavail) * disk.f_frsize;
  if (avail >= 16.0 * (1 << 20) && avail >= 0.01 * total) return "";
  return absl::StrFormat(
      "the disk holding %s is full: %.1f MB free of %.1f MB (free space there, then `sketchps run --resume --out "
      "%s` goes on from the last round every process saved)",
      out.string(), avail / 1e6, total / 1e6, out.string());
}

std::string DefaultOutDir(const std::string& job_id) {
  return absl::StrCat("runs/", job_id, "-", absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::LocalTimeZone()));
}

// One `sketchps run`: the run directory, the processes (tools/local_cluster.h), the faults
// (tools/faults.h), the progress line (tools/progress.h) and, at the end, the summary and plots.
class Launch {
 public:
  Launch(RunOptions options, JobSpec job) : options_(std::move(options)), job_(std::move(job)) {}
  absl::Status Prepare();
  absl::Status Start();
  // 0 when every worker finished, 1 on a failure, 130 on a signal.
  int Monitor();
  absl::Status Finish();
  // Stops every process at once (tools/local_cluster.h); says why the run ended and how long that took.
  void StopAll();
  void WriteFaults() const;

 private:
  fs::path CheckpointDir() const {
    return job_.checkpoint.dir.empty() ? out_ / "checkpoints" : fs::path(job_.checkpoint.dir);
  }
  absl::Status PrepareRunDirectory();
  absl::Status PrepareCheckpointKey(bool resumed);
  absl::Status PublishWorkerEnvironment();
  void ShowProgress(bool final);
  void WritePlots() const;
  absl::Status CheckEveryRoundRan(const std::vector<std::vector<nlohmann::json>>& metrics) const;

  RunOptions options_;
  JobSpec job_;
  fs::path out_;
  std::string key_file_;  // <out>/checkpoint.key, or "" for a resumed run that was made without one
  std::optional<LocalCluster> cluster_;
  std::optional<Faults> faults_;
  std::optional<Progress> progress_;
  std::optional<JsonLinesFollower> follower_;
  std::optional<WorkerWatch> watch_;  // --servers-only: the ranks' status files
  absl::Time start_ = absl::Now(), workers_start_, workers_end_;
  absl::Time last_print_ = absl::InfinitePast();
  worker::DatasetSizes data_;
  std::uint64_t printed_decile_ = 0;
  bool tty_ = isatty(STDERR_FILENO) == 1;
};

// The servers' checkpoint folder exists and takes a file: a shard that cannot write its checkpoints
// only logs it and trains on, so a folder that cannot hold them is refused before anything starts.
static absl::Status CheckCheckpointFolder(const fs::path& dir, const char* key) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat(key, " ", dir.string(), ": cannot create it: ", ec.message()));
  const fs::path probe = dir / ".sketchps-write-probe";
  const bool written = static_cast<bool>(std::ofstream(probe) << "probe\n");
  fs::remove(probe, ec);
  if (!written) return absl::InvalidArgumentError(absl::StrCat(key, " ", dir.string(), ": cannot write a file there"));
  return absl::OkStatus();
}

absl::Status Launch::PrepareRunDirectory() {
  out_ = options_.out.empty() ? DefaultOutDir(job_.job_id) : options_.out;
  if (!job_.decentralized()) {
    SKETCHPS_RETURN_IF_ERROR(
        CheckCheckpointFolder(CheckpointDir(), job_.checkpoint.dir.empty() ? "--out" : "checkpoint.dir"));
  }
  SKETCHPS_ASSIGN_OR_RETURN(const auto resumed, CheckPreviousRun(out_, CheckpointDir(), job_, options_.resume));
  if (resumed) {
    std::fprintf(stderr, "run: resuming from the checkpoints in %s: round %llu of %llu\n", CheckpointDir().c_str(),
                 static_cast<unsigned long long>(*resumed), static_cast<unsigned long long>(job_.total_rounds()));
  }
  std::error_code ec;
  fs::create_directories(out_ / "checkpoints", ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--out ", out_.string(), ": ", ec.message()));
  SKETCHPS_RETURN_IF_ERROR(WriteFileAtomically((out_ / "job.yaml").string(), job_.effective_yaml));
  SKETCHPS_RETURN_IF_ERROR(PrepareCheckpointKey(resumed.has_value()));
  if (!options_.insecure) {
    SKETCHPS_RETURN_IF_ERROR(MakeCerts(CertsOptions{(out_ / "tls").string(), job_.workers, job_.servers, 30, true}));
  }
  return absl::OkStatus();
}

// The run folder's checkpoint key: made once (32 random bytes, mode 0600), kept by --resume, given to
// the servers and workers, so that their checkpoints and state files carry an integrity tag. A run
// resumed from a folder made before keys existed has none and stays untagged (a new key would make
// its checkpoints unreadable).
absl::Status Launch::PrepareCheckpointKey(bool resumed) {
  const fs::path key = out_ / "checkpoint.key";
  std::error_code ec;
  if (!fs::exists(key, ec)) {
    if (resumed) {
      std::fprintf(stderr, "run: %s has no checkpoint.key: its checkpoints stay untagged\n", out_.c_str());
      return absl::OkStatus();
    }
    SKETCHPS_RETURN_IF_ERROR(WriteNewKeyFile(key.string()));
  }
  SKETCHPS_RETURN_IF_ERROR(FileKey::Load(key.string()).status());  // refused here rather than by every daemon
  key_file_ = fs::absolute(key).string();
  return absl::OkStatus();
}

absl::Status Launch::Prepare() {
  SKETCHPS_ASSIGN_OR_RETURN(faults_, Faults::Plan(options_.kills, job_));
  std::vector<std::string> advisories;
  SKETCHPS_ASSIGN_OR_RETURN(data_, CheckJobRunnable(job_, &advisories, !options_.script.path.empty()));
  for (const std::string& a : advisories) std::fprintf(stderr, "run: warning: %s\n", a.c_str());
  SKETCHPS_RETURN_IF_ERROR(PrepareRunDirectory());
  ClusterOptions c;
  c.out = out_;
  c.checkpoint_dir = CheckpointDir();
  c.checkpoint_key_file = key_file_;
  c.bin_dir = options_.bin_dir;
  c.log_level = options_.job.log_level;
  c.tls_dir = options_.insecure ? "" : (out_ / "tls").string();
  c.worker_threads = options_.worker_threads;
  c.peer_timeout_seconds = options_.peer_timeout_seconds;
  c.dump_rounds = options_.dump_rounds;
  c.script = options_.script;
  if (!options_.scale.empty()) {
    SKETCHPS_ASSIGN_OR_RETURN(ScalePlan plan,
                              ScalePlan::Make(job_.ps.initial_workers, options_.scale, job_.total_rounds()));
    for (std::uint32_t r = 0; r < plan.slots(); ++r) c.worker_flags.push_back(plan.WorkerFlags(r));
  }
  if (!c.script.path.empty()) {
    SKETCHPS_ASSIGN_OR_RETURN(c.script.master_port, launch::FreeLocalPort());  // a DDP script's process group
  }
  cluster_.emplace(job_, std::move(c));
  SKETCHPS_RETURN_IF_ERROR(cluster_->Prepare());
  progress_.emplace(
      ProgressPlan{job_.total_rounds(), job_.train.eval_every_rounds, job_.train.eval_samples, data_.test});
  follower_.emplace((out_ / "worker-0.jsonl").string());
  return absl::OkStatus();
}

absl::Status Launch::Start() {
  SKETCHPS_RETURN_IF_ERROR(cluster_->StartServers());
  workers_start_ = absl::Now();
  if (options_.servers_only) return PublishWorkerEnvironment();
  progress_->SetStatus(absl::StrCat(job_.workers, " workers starting (loading data, ",
                                    job_.decentralized() ? "reaching their peers)" : "joining the servers)"));
  SKETCHPS_RETURN_IF_ERROR(cluster_->StartWorkers());
  std::fprintf(stderr, "run: %u workers training %s with %s for %llu rounds (%.2f epochs); logs in %s\n", job_.workers,
               job_.model.c_str(), job_.scheme.name.c_str(), static_cast<unsigned long long>(job_.total_rounds()),
               static_cast<double>(job_.total_rounds()) / job_.rounds_per_epoch(), out_.c_str());
  return absl::OkStatus();
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

absl::Status Launch::PublishWorkerEnvironment() {
  std::string text;
  for (const std::string& e : cluster_->WorkerEnvironment()) absl::StrAppend(&text, e, "\n");
  const fs::path file = out_ / "workers.env";
  watch_.emplace(out_);
  watch_->Clear();  // an earlier run's (a --resume'd one): its processes are gone
  SKETCHPS_RETURN_IF_ERROR(WriteFileAtomically(file.string(), text));
  std::printf("%s", text.c_str());
  std::fflush(stdout);
  std::fprintf(stderr,
               "run: %u servers ready for %u workers; start them with their RANK and WORLD_SIZE and this "
               "environment, e.g.\n  (set -a; . %s; torchrun --nproc_per_node %u SCRIPT)\n(Debian 12's torchrun "
               "1.13 under Python 3.11 also needs --redirects 1 --tee 1)\nrun: waiting until every worker has left "
               "the job (Ctrl-C stops the servers)\n",
               job_.servers, job_.workers, file.c_str(), job_.workers);
  progress_->SetStatus("waiting for the workers (started by another launcher)");
  return absl::OkStatus();
}

int Launch::Monitor() {
  for (;;) {
    if (const std::string sig = PendingTerminationSignal(); !sig.empty()) {
      std::fprintf(stderr, "\nrun: %s: stopping every process\n", sig.c_str());
      return 130;
    }
    faults_->RestartStalled(*cluster_, progress_->rounds_done());
    if (auto failure = cluster_->FirstFailure(faults_->killed_workers())) {
      return faults_->Failed(*failure, progress_->rounds_done());
    }
    if (watch_) {
      if (const auto lost = watch_->Lost()) {
        ShowProgress(true);
        std::fprintf(stderr, "run: failed: %s; stopping the servers (the job cannot go on without it)\n",
                     lost->c_str());
        return 1;
      }
    }
    const bool all_done =
        options_.servers_only ? cluster_->ServersDone() : cluster_->WorkersDone(faults_->killed_workers());
    ShowProgress(all_done);
    faults_->Inject(progress_->rounds_done(), *cluster_);
    if (all_done) {
      workers_end_ = absl::Now();
      return 0;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

void Launch::StopAll() {
  const absl::Time t0 = absl::Now();
  cluster_->StopAll();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  if (const auto it = faults_->record().find("first_failure"); it != faults_->record().end()) {
    std::fprintf(stderr, "run: failed: %s exited with code %d; every other process stopped in %.1f s\n",
                 (*it)["process"].get<std::string>().c_str(), (*it)["code"].get<int>(), seconds);
    if (const std::string full = FullDisk(out_); !full.empty()) std::fprintf(stderr, "run: %s\n", full.c_str());
  } else {
    std::fprintf(stderr, "run: every process stopped in %.1f s\n", seconds);
  }
}

void Launch::WriteFaults() const {
  if (auto st = faults_->Write(out_); !st.ok()) std::fprintf(stderr, "run: %s\n", std::string(st.message()).c_str());
}

absl::Status Launch::Finish() {
  SKETCHPS_RETURN_IF_ERROR(cluster_->StopServers());
  if (options_.servers_only && !fs::exists(out_ / "worker-0.jsonl")) {
    std::fprintf(stderr, "run: the servers are done; no summary: the workers wrote no records to %s\n",
                 (out_ / "worker-{rank}.jsonl").c_str());
    return absl::OkStatus();
  }
  std::vector<std::vector<nlohmann::json>> metrics;
  for (std::uint32_t r = 0; r < job_.workers; ++r) {
    SKETCHPS_ASSIGN_OR_RETURN(auto records, ReadJsonLines((out_ / absl::StrCat("worker-", r, ".jsonl")).string()));
    metrics.push_back(std::move(records));
  }
  std::string reported;
  for (const nlohmann::json& record : metrics[ReportingRank(metrics)]) absl::StrAppend(&reported, record.dump(), "\n");
  SKETCHPS_RETURN_IF_ERROR(WriteFileAtomically((out_ / "metrics.jsonl").string(), reported));
  RunFacts facts;
  facts.scheme = job_.scheme.name;
  facts.model = job_.model;
  facts.workers = job_.workers;
  facts.servers = job_.decentralized() ? 0u : job_.servers;
  facts.density = job_.scheme.density;
  facts.rounds_per_epoch = job_.rounds_per_epoch();
  facts.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  facts.train_seconds = absl::ToDoubleSeconds(workers_end_ - workers_start_);
  facts.job_id = job_.job_id;
  facts.mode = ModeName(job_.mode);
  facts.optimizer = OptimizerName(job_.optimizer.kind);
  facts.learning_rate = job_.optimizer.lr.base_lr;
  facts.planned_rounds = job_.total_rounds();
  facts.momentum = job_.optimizer.momentum;
  facts.batch_size = job_.data.batch_size;
  facts.faults = faults_->record();
  facts.date = UtcNow();
  facts.machine = ThisMachine();
  if (job_.decentralized()) {
    facts.peer = {{"timeout_seconds",
                   options_.peer_timeout_seconds > 0 ? options_.peer_timeout_seconds : job_.peer.timeout_seconds},
                  {"on_failure", job_.peer.on_failure == OnPeerFailure::kRegroup ? "regroup" : "stop"}};
  }
  SKETCHPS_ASSIGN_OR_RETURN(nlohmann::json summary, Summarize(facts, metrics));
  SKETCHPS_RETURN_IF_ERROR(WriteFileAtomically((out_ / "summary.json").string(), summary.dump(2) + "\n"));
  SKETCHPS_RETURN_IF_ERROR(CheckEveryRoundRan(metrics));
  std::fprintf(stderr,
               "run: done in %.1f s: test accuracy %s, %.0f bytes up and %.0f down per worker per round (%.1fx / %.1fx "
               "less than dense)\n",
               facts.wall_seconds, summary["final_test_accuracy"].dump().c_str(),
               summary["bytes_up_per_worker_per_round"].get<double>(),
               summary["bytes_down_per_worker_per_round"].get<double>(), summary["compression_ratio_up"].get<double>(),
               summary["compression_ratio_down"].get<double>());
  if (const nlohmann::json& growth = summary["residual_growth"]; growth.is_object()) {
    std::fprintf(stderr, "run: warning: %s\n", growth["message"].get<std::string>().c_str());
  }
  if (const nlohmann::json& floor = summary["recovery_floor"]; floor.is_object()) {
    std::fprintf(stderr, "run: warning: %s\n", floor["message"].get<std::string>().c_str());
  }
  if (const std::string skipped = DescribeSkippedRounds(metrics); !skipped.empty()) {
    std::fprintf(stderr, "run: warning: %s\n", skipped.c_str());
  }
  if (options_.plots) WritePlots();
  std::printf("%s\n", (out_ / "summary.json").c_str());
  return absl::OkStatus();
}

// A run whose workers left the job before its last planned round did not do what the job says (a
// script's loop that ran fewer rounds than the plan: see the message), so it is not a success.
absl::Status Launch::CheckEveryRoundRan(const std::vector<std::vector<nlohmann::json>>& metrics) const {
  std::uint64_t ran = 0;
  for (const auto& records : metrics) {
    if (!records.empty()) ran = std::max<std::uint64_t>(ran, records.back().value("round", 0ull) + 1);
  }
  const std::uint64_t planned = job_.total_rounds();
  if (ran >= planned) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "failed: the workers left the job after round %llu of its %llu planned rounds (summary.json written, with "
      "planned_rounds). Each rank's stderr%s names the likely cause: a loop whose batches are not the job's "
      "rounds (under gradient accumulation data.batch_size is the samples of one step per rank, the DataLoader's "
      "batch_size times the micro-batches; torch's DistributedSampler instead of sketchps.torch.DistributedSampler), "
      "a loop capped by len(loader) or a step count after --resume, or a script that ended without finish(). "
      "Set train.rounds or train.epochs to what the loop runs, or loop until opt.done / state.done",
      static_cast<unsigned long long>(ran), static_cast<unsigned long long>(planned),
      options_.servers_only ? "" : absl::StrCat(" (", (out_ / "worker-{rank}.log").string(), ")")));
}

void Launch::WritePlots() const {
  if (auto st = tools::WritePlots({out_.string()}, (out_ / "accuracy").string(), (out_ / "recovery").string());
      !st.ok()) {
    std::fprintf(stderr, "run: no accuracy plots: %s\n", std::string(st.message()).c_str());
  }
}

}  // namespace

// The job, with the keys a --script defines (tools/run_script.h) and those of a --scale plan
// (tools/scale_plan.h) as further overrides.
static absl::StatusOr<JobSpec> LoadScriptJob(const RunOptions& options) {
  SKETCHPS_ASSIGN_OR_RETURN(JobSpec job, LoadJobSpec(options.job.job_path, options.job.overrides));
  if (!options.scale.empty()) {
    if (!options.script.path.empty()) return absl::InvalidArgumentError("--scale: not with --script");
    if (job.decentralized()) return absl::InvalidArgumentError("--scale: elastic membership is for mode: ps");
    SKETCHPS_ASSIGN_OR_RETURN(ScalePlan plan, ScalePlan::Make(job.workers, options.scale, job.total_rounds()));
    std::vector<std::string> overrides = options.job.overrides;
    for (const std::string& o : plan.Overrides()) overrides.push_back(o);
    return LoadJobSpec(options.job.job_path, overrides);
  }
  if (options.script.path.empty()) return job;
  if (!options.dump_rounds.empty()) return absl::InvalidArgumentError("--dump-gradients: not with --script");
  SKETCHPS_ASSIGN_OR_RETURN(auto keys, DescribeScript(options.script, job.effective_yaml));
  std::vector<std::string> notes;
  SKETCHPS_RETURN_IF_ERROR(ReconcileScriptKeys(options.job.overrides, job.effective_yaml, keys, &notes));
  for (const std::string& note : notes) std::fprintf(stderr, "run: %s\n", note.c_str());
  std::vector<std::string> overrides = options.job.overrides;
  overrides.insert(overrides.end(), keys.begin(), keys.end());
  return LoadJobSpec(options.job.job_path, overrides);
}

// The flags that only some jobs can honour: refused by name rather than ignored.
static absl::Status CheckFlagsFitTheJob(const RunOptions& options, const JobSpec& job) {
  if (options.servers_only && job.decentralized()) {
    return absl::InvalidArgumentError("--servers-only: mode decentralized has no servers");
  }
  const std::pair<bool, const char*> worker_flags[] = {{!options.kills.empty(), "--kill"},
                                                       {!options.dump_rounds.empty(), "--dump-gradients"},
                                                       {!options.scale.empty(), "--scale"}};
  for (const auto& [given, flag] : worker_flags) {
    if (options.servers_only && given) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": not with --servers-only (the workers are not this launcher's, and workers.env does not carry it)"));
    }
  }
  for (const std::uint64_t r : options.dump_rounds) {
    if (r >= job.total_rounds()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dump-gradients ", r, ": the job's rounds are 0..", job.total_rounds() - 1));
    }
  }
  if (options.peer_timeout_seconds > 0 && !job.decentralized()) {
    return absl::InvalidArgumentError("--peer-timeout-seconds: decentralized mode only (this job is mode: ps)");
  }
  return absl::OkStatus();
}

int RunJob(const RunOptions& options) {
  BlockTerminationSignals();
  auto job = LoadScriptJob(options);
  if (job.ok()) {
    if (auto st = CheckFlagsFitTheJob(options, *job); !st.ok()) job = st;
  }
  if (!job.ok()) {
    std::fprintf(stderr, "sketchps run: %s\n", std::string(job.status().message()).c_str());
    return 2;
  }
  Launch launch(options, *job);
  if (auto st = launch.Prepare(); !st.ok()) {
    std::fprintf(stderr, "sketchps run: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  if (auto st = launch.Start(); !st.ok()) {
    std::fprintf(stderr, "sketchps run: %s\n", std::string(st.message()).c_str());
    launch.StopAll();
    return 1;
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
