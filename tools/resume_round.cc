#include "tools/resume_round.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/reason.h"
#include "common/status.h"
#include "ps/checkpoint.h"
#include "session/scheme_state_file.h"

namespace sketchps::tools {
namespace fs = std::filesystem;
namespace {

using Rounds = std::map<std::uint32_t, std::set<std::uint64_t>>;

// Files a check in `status`: intact (into `intact`), damaged (into held.damaged), or an error that
// must stop the resume (an integrity tag, an unreadable file), returned naming the owner.
absl::Status Sort(const absl::Status& status, const std::string& owner, std::uint64_t round, HeldFiles& held,
                  std::set<std::uint64_t>& intact) {
  if (status.ok()) {
    intact.insert(round);
    return absl::OkStatus();
  }
  if (IsDamagedFile(status)) {
    held.damaged.push_back(DamagedFile{owner, round, std::string(status.message())});
    return absl::OkStatus();
  }
  return Annotate(status, absl::StrCat("--resume: ", owner));
}

std::string OwnerOf(bool shard, std::uint32_t index) { return absl::StrCat(shard ? "shard " : "worker ", index); }

// The rounds every one of `count` owners holds; with_damaged: a damaged file counts as held.
std::set<std::uint64_t> Common(const Rounds& rounds, const std::vector<DamagedFile>& damaged, bool shard,
                               std::uint32_t count, bool with_damaged) {
  std::optional<std::set<std::uint64_t>> common;
  for (std::uint32_t i = 0; i < count; ++i) {
    std::set<std::uint64_t> held;
    if (const auto it = rounds.find(i); it != rounds.end()) held = it->second;
    for (const DamagedFile& d : damaged) {
      if (with_damaged && d.owner == OwnerOf(shard, i)) held.insert(d.round);
    }
    if (!common) {
      common = std::move(held);
    } else {
      std::erase_if(*common, [&](std::uint64_t r) { return !held.contains(r); });
    }
  }
  return common.value_or(std::set<std::uint64_t>());
}

struct Pick {
  std::uint64_t round = 0;
  bool worker_state = false;  // every worker holds a state file of the round
  bool unrecorded = false;    // the records end before it
};

// The round to resume from, counting damaged files as held or not; nullopt when no round is held by
// every shard.
std::optional<Pick> PickRound(const HeldFiles& held, std::uint32_t servers, std::uint32_t workers,
                              std::uint64_t recorded, bool with_damaged) {
  const std::set<std::uint64_t> shards = Common(held.shards, held.damaged, true, servers, with_damaged);
  if (shards.empty()) return std::nullopt;
  std::set<std::uint64_t> both = Common(held.workers, held.damaged, false, workers, with_damaged);
  std::erase_if(both, [&](std::uint64_t r) { return !shards.contains(r); });
  const std::set<std::uint64_t>& candidates = both.empty() ? shards : both;
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    if (*it <= recorded) return Pick{*it, !both.empty(), false};
  }
  return Pick{*candidates.begin(), !both.empty(), true};
}

// The damaged files of `round` or later, "<why> (shard 1)" each.
std::vector<std::string> DamagedFrom(const HeldFiles& held, std::uint64_t round) {
  std::vector<std::string> out;
  for (const DamagedFile& d : held.damaged) {
    if (d.round >= round) out.push_back(absl::StrCat(d.why, " (", d.owner, ")"));
  }
  return out;
}

std::string Held(const Rounds& rounds) {
  std::vector<std::string> held;
  for (const auto& [owner, r] : rounds) held.push_back(absl::StrCat("shard ", owner, ": ", absl::StrJoin(r, ", ")));
  return absl::StrJoin(held, "; ");
}

void AddNotes(const Pick& pick, std::uint64_t recorded, ResumePoint& point) {
  if (!pick.worker_state) {
    point.notes.push_back(absl::StrCat("warning: the workers hold no intact state file of round ", pick.round,
                                       ": they restart with empty scheme state (error-feedback residuals, local "
                                       "momentum), so the resumed job will not end where an uninterrupted one would"));
  }
  if (pick.unrecorded) {
    point.notes.push_back(absl::StrCat("warning: the workers' records end at round ", recorded,
                                       ", the oldest round every shard holds is ", pick.round, ": rounds ", recorded,
                                       " to ", pick.round - 1, " will have no records"));
  }
}

}  // namespace

std::string ScriptStateFileName(std::uint32_t rank, std::uint64_t rounds_applied) {
  return absl::StrFormat("worker-%u-script-%012u.pt", rank, rounds_applied);
}

bool HoldsScriptState(const std::string& state_dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(state_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("worker-") && name.find("-script-") != std::string::npos && name.ends_with(".pt")) return true;
  }
  return false;
}

absl::StatusOr<HeldFiles> ScanRunFolder(const std::string& checkpoint_dir, const std::string& state_dir,
                                        std::uint32_t servers, std::uint32_t workers, const FileKey* key,
                                        bool script_state) {
  HeldFiles held;
  for (const auto& [shard, rounds] : ps::CheckpointRounds(checkpoint_dir)) {
    if (shard >= servers) continue;
    for (const std::uint64_t round : rounds) {
      const std::string path = (fs::path(checkpoint_dir) / ps::CheckpointFileName(shard, round)).string();
      SKETCHPS_RETURN_IF_ERROR(
          Sort(ps::ReadCheckpointFile(path, key).status(), OwnerOf(true, shard), round, held, held.shards[shard]));
    }
  }
  for (std::uint32_t w = 0; w < workers; ++w) {
    for (const std::uint64_t round : session::StateFileRounds(state_dir, w)) {
      if (script_state && !fs::exists(fs::path(state_dir) / ScriptStateFileName(w, round))) continue;
      const std::string path = (fs::path(state_dir) / session::StateFileName(w, round)).string();
      SKETCHPS_RETURN_IF_ERROR(
          Sort(session::CheckStateFile(path, key), OwnerOf(false, w), round, held, held.workers[w]));
    }
  }
  return held;
}

absl::StatusOr<ResumePoint> ChooseResumeRound(const HeldFiles& held, std::uint32_t servers, std::uint32_t workers,
                                              std::uint64_t recorded, bool older_if_damaged,
                                              const std::string& checkpoint_dir) {
  const std::optional<Pick> counting_damaged = PickRound(held, servers, workers, recorded, true);
  const std::optional<Pick> intact = PickRound(held, servers, workers, recorded, false);
  if (!counting_damaged) {
    return absl::InvalidArgumentError(absl::StrCat("--resume: no round has a checkpoint of every shard in ",
                                                   checkpoint_dir, " (", Held(held.shards), ")"));
  }
  ResumePoint point;
  if (!intact || intact->round != counting_damaged->round) {
    const std::string damaged = absl::StrJoin(DamagedFrom(held, counting_damaged->round), "; ");
    if (!older_if_damaged) {
      return WithReason(
          absl::InvalidArgumentError(absl::StrCat(
              "--resume: damaged: ", damaged, "; ",
              intact ? absl::StrCat("the newest round every shard and worker holds intact is ", intact->round,
                                    ": to resume from it, pass --set checkpoint.on_damaged=older")
                     : std::string("no round is held intact by every shard"))),
          Reason::kDamagedFile);
    }
    if (!intact) {
      return absl::InvalidArgumentError(absl::StrCat("--resume: no round is held intact by every shard in ",
                                                     checkpoint_dir, " (damaged: ", damaged, ")"));
    }
    point.notes.push_back(absl::StrCat("checkpoint.on_damaged: older: passing over ", damaged));
  }
  point.round = intact->round;
  point.worker_state = intact->worker_state;
  AddNotes(*intact, recorded, point);
  return point;
}

}  // namespace sketchps::tools
