// A run directory that already holds a run (tools/run.h): refused, or resumed with --resume.
//
// A previous run is any of: checkpoints in the checkpoint folder (ps/checkpoint.h file names),
// <out>/summary.json, <out>/worker-0.jsonl. Without --resume such a directory is refused (rerunning
// would otherwise load the finished checkpoints and train 0 rounds). With --resume, in ps mode, the
// run resumes at the newest round of which every shard holds an intact checkpoint, every worker an
// intact state file and every worker's records reach (tools/resume_round.h: damaged files are refused
// or, with checkpoint.on_damaged: older, passed over), below the job's last: a shard's newer
// checkpoints (a shard stopped one round ahead of another) are moved to <checkpoints>/superseded; the
// workers' records of the rounds from there on are dropped (they will be run again) and the previous
// summary, metrics.jsonl and faults.json are removed. Before anything is moved, the job must be the
// run's own: a job whose fingerprint differs from <out>/job.yaml's is refused naming the keys.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "absl/status/statusor.h"
#include "job/job_spec.h"

namespace sketchps::tools {

// nullopt: nothing to resume, go on (a fresh directory). A round: the run resumes there (the
// records are trimmed). InvalidArgument naming --out or --resume otherwise.
absl::StatusOr<std::optional<std::uint64_t>> CheckPreviousRun(const std::filesystem::path& out,
                                                              const std::filesystem::path& checkpoint_dir,
                                                              const JobSpec& job, bool resume);

}  // namespace sketchps::tools
