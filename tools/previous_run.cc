#include "tools/previous_run.h"

#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net/rendezvous_file.h"
#include "common/status.h"
#include "common/wire/file_key.h"
#include "common/wire/fingerprint.h"
#include "ps/checkpoint.h"
#include "tools/resume_round.h"
#include "tools/summary.h"

namespace sketchps::tools {
namespace fs = std::filesystem;
namespace {

// The number of leading rounds (0, 1, ...) every worker's records hold: a worker stopped by a
// signal may not have written its last round or two, which the shards already applied.
absl::StatusOr<std::uint64_t> RecordedRounds(const fs::path& out, std::uint32_t workers) {
  std::uint64_t recorded = std::numeric_limits<std::uint64_t>::max();
  for (std::uint32_t r = 0; r < workers; ++r) {
    const fs::path file = out / absl::StrCat("worker-", r, ".jsonl");
    std::uint64_t next = 0;
    if (fs::exists(file)) {
      SKETCHPS_ASSIGN_OR_RETURN(auto records, ReadJsonLines(file.string()));
      for (const auto& rec : records) {
        if (rec.value("round", next + 1) == next) ++next;
      }
    }
    recorded = std::min(recorded, next);
  }
  return recorded;
}

// The round to resume from (tools/resume_round.h), its notes printed; the run's checkpoint key, when
// it has one, checks the files' integrity tags.
absl::StatusOr<std::uint64_t> ResumeRound(const fs::path& out, const std::string& dir, const JobSpec& job) {
  std::shared_ptr<const FileKey> key;
  if (const fs::path file = out / "checkpoint.key"; fs::exists(file)) {
    SKETCHPS_ASSIGN_OR_RETURN(key, FileKey::LoadIfGiven(file.string()));
  }
  // A torch optimizer's job (optimizer.name external), or scripts that saved their state (BatchNorm
  // buffers, schedulers), resume only where every script saved it.
  const std::string state_dir = (out / kWorkerStateFolder).string();
  const bool script = job.optimizer.kind == OptimizerKind::kExternal || HoldsScriptState(state_dir);
  SKETCHPS_ASSIGN_OR_RETURN(const HeldFiles held,
                            ScanRunFolder(dir, state_dir, job.servers, job.workers, key.get(), script));
  SKETCHPS_ASSIGN_OR_RETURN(const std::uint64_t recorded, RecordedRounds(out, job.workers));
  SKETCHPS_ASSIGN_OR_RETURN(const ResumePoint point, ChooseResumeRound(held, job.servers, job.workers, recorded,
                                                                       job.checkpoint.older_if_damaged, dir));
  if (script && !point.worker_state) {  // refused before anything is moved
    return absl::InvalidArgumentError(absl::StrCat(
        "--resume: a script job (optimizer.name external, or script state files in the state folder): no "
        "round of which every shard holds a checkpoint and every worker its state and its script's state (",
        ScriptStateFileName(0, point.round), " ... in ", state_dir,
        ", saved by the package at every checkpoint.every_rounds round); nothing was moved. Restart the job "
        "with another --out"));
  }
  for (const std::string& note : point.notes) std::fprintf(stderr, "run: %s\n", note.c_str());
  return point.round;
}

// Moves every shard's checkpoints newer than `round` into <dir>/superseded, so that the shards
// load `round`; says so.
absl::Status SetAsideNewer(const std::string& dir, std::uint32_t servers, std::uint64_t round) {
  const std::string aside = (fs::path(dir) / "superseded").string();
  for (std::uint32_t s = 0; s < servers; ++s) {
    SKETCHPS_ASSIGN_OR_RETURN(const auto moved, ps::SetAsideCheckpointsAfter(dir, s, round, aside));
    for (const std::string& m : moved) {
      std::fprintf(stderr, "run: shard %u's checkpoint past round %llu moved to %s\n", s,
                   static_cast<unsigned long long>(round), m.c_str());
    }
  }
  return absl::OkStatus();
}

// Keeps each worker's records of the rounds before `round`; removes what described the old end.
absl::Status Trim(const fs::path& out, std::uint32_t workers, std::uint64_t round) {
  for (std::uint32_t r = 0; r < workers; ++r) {
    const fs::path file = out / absl::StrCat("worker-", r, ".jsonl");
    if (!fs::exists(file)) continue;
    SKETCHPS_ASSIGN_OR_RETURN(auto records, ReadJsonLines(file.string()));
    std::string kept;
    for (const auto& rec : records) {
      if (rec.value("round", 0ull) < round) absl::StrAppend(&kept, rec.dump(), "\n");
    }
    SKETCHPS_RETURN_IF_ERROR(WriteFileAtomically(file.string(), kept));
  }
  std::error_code ec;
  for (const char* stale : {"summary.json", "metrics.jsonl", "faults.json"}) fs::remove(out / stale, ec);
  return absl::OkStatus();
}

// A resume continues the same job: the run's job.yaml (as its launcher wrote it) must have the
// fingerprint of this one. Otherwise the rest of the run would train on other settings and its
// job.yaml would be replaced; and more rounds than a finished run had would wait on shards whose
// checkpoints say every worker has left.
absl::Status CheckSameJob(const fs::path& out, const JobSpec& job) {
  const fs::path path = out / "job.yaml";
  std::error_code ec;
  if (!fs::exists(path, ec)) return absl::OkStatus();  // a run stopped before its launcher wrote it
  auto previous = LoadJobSpec(path.string());
  if (!previous.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--resume: the run's ", path.string(), ": ", previous.status().message()));
  }
  const std::vector<std::string> keys = DiffKeys(job.fingerprint, previous->fingerprint);
  if (keys.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--resume: this job differs from the run being resumed (", path.string(), ") in ",
                   absl::StrJoin(keys, ", "), "; a resume continues the same job: give it that job (--job ",
                   path.string(), " and no --set), or choose another --out to train the changed one"));
}

}  // namespace

absl::StatusOr<std::optional<std::uint64_t>> CheckPreviousRun(const fs::path& out, const fs::path& checkpoint_dir,
                                                              const JobSpec& job, bool resume) {
  const std::string dir = checkpoint_dir.string();
  const auto rounds = ps::CheckpointRounds(dir);
  std::vector<std::string> found;
  if (!rounds.empty()) found.push_back(absl::StrCat("checkpoints in ", dir));
  for (const char* file : {"summary.json", "worker-0.jsonl"}) {
    if (fs::exists(out / file)) found.push_back((out / file).string());
  }
  if (found.empty()) {
    if (resume) return absl::InvalidArgumentError(absl::StrCat("--resume: ", out.string(), " holds no previous run"));
    return std::optional<std::uint64_t>();
  }
  if (!resume) {
    return absl::InvalidArgumentError(absl::StrCat("--out ", out.string(), ": holds a previous run (",
                                                   absl::StrJoin(found, ", "),
                                                   "); pass --resume to continue it from its checkpoints, or choose "
                                                   "another --out"));
  }
  if (job.decentralized()) {
    return absl::InvalidArgumentError(
        "--resume: decentralized mode keeps no checkpoints, so there is nothing to resume "
        "from; choose another --out");
  }
  SKETCHPS_RETURN_IF_ERROR(CheckSameJob(out, job));
  SKETCHPS_ASSIGN_OR_RETURN(const std::uint64_t round, ResumeRound(out, dir, job));
  if (round >= job.total_rounds()) {
    return absl::InvalidArgumentError(absl::StrCat("--resume: the checkpoints in ", dir, " already hold round ", round,
                                                   " of ", job.total_rounds(),
                                                   ": the job is complete; choose another --out to "
                                                   "train again"));
  }
  SKETCHPS_RETURN_IF_ERROR(SetAsideNewer(dir, job.servers, round));
  SKETCHPS_RETURN_IF_ERROR(Trim(out, job.workers, round));
  return std::optional<std::uint64_t>(round);
}

}  // namespace sketchps::tools
