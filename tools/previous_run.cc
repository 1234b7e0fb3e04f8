#include "tools/previous_run.h"

#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net/rendezvous_file.h"
#include "common/status.h"
#include "ps/checkpoint.h"
#include "tools/summary.h"

namespace sketchps::tools {
namespace fs = std::filesystem;
namespace {

// The rounds of which every shard holds a checkpoint, newest first.
absl::StatusOr<std::vector<std::uint64_t>> CommonRounds(const std::map<std::uint32_t, std::set<std::uint64_t>>& rounds,
                                                        const std::string& dir, std::uint32_t servers) {
  std::optional<std::set<std::uint64_t>> common;
  std::vector<std::string> held;
  for (std::uint32_t s = 0; s < servers; ++s) {
    const auto it = rounds.find(s);
    if (it == rounds.end())
      return absl::InvalidArgumentError(absl::StrCat("--resume: ", dir, " holds no checkpoint of shard ", s));
    held.push_back(absl::StrCat("shard ", s, ": ", absl::StrJoin(it->second, ", ")));
    if (!common) {
      common = it->second;
    } else {
      std::erase_if(*common, [&](std::uint64_t r) { return !it->second.contains(r); });
    }
  }
  if (!common || common->empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--resume: no round has a checkpoint of every shard in ", dir, " (",
                                                   absl::StrJoin(held, "; "), ")"));
  }
  return std::vector<std::uint64_t>(common->rbegin(), common->rend());
}

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

// The newest round every shard holds that every worker's records reach; when no checkpoint is that
// old, the oldest round every shard holds, and the records of the rounds in between are missing.
absl::StatusOr<std::uint64_t> ResumeRound(const std::map<std::uint32_t, std::set<std::uint64_t>>& rounds,
                                          const fs::path& out, const std::string& dir, const JobSpec& job) {
  SKETCHPS_ASSIGN_OR_RETURN(const auto common, CommonRounds(rounds, dir, job.servers));
  SKETCHPS_ASSIGN_OR_RETURN(const std::uint64_t recorded, RecordedRounds(out, job.workers));
  for (const std::uint64_t r : common) {
    if (r <= recorded) return r;
  }
  std::fprintf(stderr,
               "run: warning: the workers' records end at round %llu, the oldest checkpoint every shard "
               "holds is round %llu: rounds %llu to %llu will have no records\n",
               static_cast<unsigned long long>(recorded), static_cast<unsigned long long>(common.back()),
               static_cast<unsigned long long>(recorded), static_cast<unsigned long long>(common.back() - 1));
  return common.back();
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
  SKETCHPS_ASSIGN_OR_RETURN(const std::uint64_t round, ResumeRound(rounds, out, dir, job));
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
