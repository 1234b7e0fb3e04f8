// The round a `sketchps run --resume` continues from (tools/previous_run.h): the newest round of which
// every shard holds an intact checkpoint, every worker an intact state file (its error-feedback
// residuals, local momentum, carried gradient: session/scheme_state_file.h) and every worker's records
// reach. Shards and workers then start from the same round with all their state, so the resumed job
// ends bitwise where the uninterrupted one would.
//
//   ScanRunFolder reads every checkpoint and state file of the job and checks its framing, CRC and
//   integrity tag (the run's checkpoint.key). A file refused for its tag (a wrong tag, or a key
//   problem) stops the scan with that error, naming the file: never skipped (docs/security.md).
//   ChooseResumeRound picks the round. A damaged file (IsDamagedFile: truncated, a flipped byte) at
//   the round the folder would otherwise resume from is refused, naming the file, its shard or
//   worker, and the round the job could resume from intact, unless `older_if_damaged` (the job key
//   checkpoint.on_damaged: older): then the job resumes from the newest round every shard and
//   worker holds intact, and the notes say which files were passed over.
//   Script workers whose torch optimizer applies the update (optimizer.name external) keep their
//   state in the script (weights, BatchNorm buffers, the torch optimizer, schedulers): the package
//   saves it at every shard checkpoint round as ScriptStateFileName (python/sketchps/_resume.py), and
//   with `script_state` a worker's state file counts as held only with its script file of the round.
//   Folders without any state file of a round every shard holds (written before the workers saved
//   their state every round, or by workers that keep none) resume from the shards' round, with a
//   note that the workers start with empty scheme state.
// Errors: InvalidArgument naming --resume and the folder when no round is held by every shard.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sketchps {
class FileKey;
}

namespace sketchps::tools {

// The workers' state folder in the run directory (`sketchps run` gives every worker --state-dir).
inline constexpr char kWorkerStateFolder[] = "worker-state";

// The script's state of a worker after `rounds_applied` rounds, in the workers' state folder:
// worker-<rank>-script-<rounds_applied, 12 digits>.pt (a torch.save file; python/sketchps/_resume.py).
std::string ScriptStateFileName(std::uint32_t rank, std::uint64_t rounds_applied);
// Whether `state_dir` holds any script state file (a script saved its state: it resumes only where it did).
bool HoldsScriptState(const std::string& state_dir);

// A file that failed its framing or CRC check.
struct DamagedFile {
  std::string owner;  // "shard 1" or "worker 2"
  std::uint64_t round = 0;
  std::string why;  // the check's message (it names the file)
};

struct HeldFiles {
  std::map<std::uint32_t, std::set<std::uint64_t>> shards;   // intact checkpoint rounds, by shard
  std::map<std::uint32_t, std::set<std::uint64_t>> workers;  // intact state-file rounds, by worker
  std::vector<DamagedFile> damaged;
};

absl::StatusOr<HeldFiles> ScanRunFolder(const std::string& checkpoint_dir, const std::string& state_dir,
                                        std::uint32_t servers, std::uint32_t workers, const FileKey* key,
                                        bool script_state = false);

struct ResumePoint {
  std::uint64_t round = 0;
  std::vector<std::string> notes;  // for stderr: files passed over, state the workers lack, records
  bool worker_state = false;       // every worker holds its state file (and script file) of the round
};

// `recorded`: the rounds every worker's records reach; `workers`: the job's worker count.
absl::StatusOr<ResumePoint> ChooseResumeRound(const HeldFiles& held, std::uint32_t servers, std::uint32_t workers,
                                              std::uint64_t recorded, bool older_if_damaged,
                                              const std::string& checkpoint_dir);

}  // namespace sketchps::tools
