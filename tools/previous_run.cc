#include "tools/previous_run.h"

#include <map>
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

// The round every shard's newest checkpoint holds.
absl::StatusOr<std::uint64_t> CommonRound(const std::map<std::uint32_t, std::uint64_t>& rounds, const std::string& dir,
                                          std::uint32_t servers) {
  std::set<std::uint64_t> distinct;
  for (std::uint32_t s = 0; s < servers; ++s) {
    const auto it = rounds.find(s);
    if (it == rounds.end())
      return absl::InvalidArgumentError(absl::StrCat("--resume: ", dir, " holds no checkpoint of shard ", s));
    distinct.insert(it->second);
  }
  if (distinct.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--resume: the shards' newest checkpoints in ", dir,
                                                   " are at different rounds (", absl::StrJoin(distinct, ", "), ")"));
  }
  return *distinct.begin();
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
  const auto rounds = ps::NewestCheckpointRounds(dir);
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
  SKETCHPS_ASSIGN_OR_RETURN(const std::uint64_t round, CommonRound(rounds, dir, job.servers));
  if (round >= job.total_rounds()) {
    return absl::InvalidArgumentError(absl::StrCat("--resume: the checkpoints in ", dir, " already hold round ", round,
                                                   " of ", job.total_rounds(),
                                                   ": the job is complete; choose another --out to "
                                                   "train again"));
  }
  SKETCHPS_RETURN_IF_ERROR(Trim(out, job.workers, round));
  return std::optional<std::uint64_t>(round);
}

}  // namespace sketchps::tools
