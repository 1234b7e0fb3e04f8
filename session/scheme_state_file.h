// SchemeStateFiles: a worker's state on disk, so that a worker killed mid-job and restarted goes on
// exactly where it stopped (docs/reliability.md "Killing a worker").
//
// What is saved after every round: every shard range's Scheme::SaveState() (error-feedback
// residuals, local momentum, SIDCo/SDAGC stage state, DGC's clipping state) and its carried gradient
// (Scheme::CarriedGradient: rounds a round deadline left this worker out of), the worker's weights, its
// replica's optimizer state, and the worker's own state outside the replica when SetLocal gave one
// (WorkerLocalState: the inner optimizer's state of train.inner_state keep; empty otherwise).
//
// Files: <dir>/worker-<rank>-state-<rounds_applied, 12 digits>.bin, framed like a shard checkpoint
// (common/wire/framed_file.h, magic "SKPSWST1": a length and a CRC32 that the loader verifies) around
// a sketchps.v1.WorkerSchemeState. With a checkpoint key (the worker's --checkpoint-key-file) the
// files carry an HMAC-SHA256 integrity tag under it instead ("SKPKWST1"), and only files whose tag
// matches are restored. SaveAsync snapshots the state after a round and writes the file on
// a thread of its own (atomic rename; no fsync, see Durability::kSurvivesProcessKill), so the write
// overlaps the next round's compute; WaitSaved waits for it. The caller must wait before it sends
// anything of the next round: then the shards can never apply a round whose predecessor's file is
// not complete, so the newest file is at most one round behind them (the replay below). Each write
// removes the previous file, except at the rounds where the
// shards checkpoint (multiples of checkpoint_every), of which the newest three are kept: a whole-job
// `--resume` from a shard checkpoint of round R then finds the workers' state of round R too.
//
// Restore(R, replica, params), R being the round the shards say this worker (re)joins at:
//   - a file of round R: the schemes' state (and the local state) is restored; params and the
//     optimizer state stay as the shards gave them (the same values), unless `from_file` (some
//     shards are a round ahead, so params hold two rounds: engine/transport.h), then they are
//     restored too; the worker starts at R;
//   - else a file of round R - 1: the shards applied one more round than the worker saved (it was
//     killed between that round's result and its file). Schemes, local state, params and optimizer
//     state are restored from the file and the worker starts at R - 1: it replays that round, whose
//     pushes the shards acknowledge as retries and whose results they still hold
//     (engine/phase_table.h keeps the last kRetainRounds), and ends it with the shards' weights,
//     checked bitwise as every round;
//   - else (a fresh job, a first start, a worker that never saved, or a directory further behind):
//     nothing changes, the worker starts at R with empty scheme state, and the note says what was
//     found;
//   - a file that fails validation (magic, length, CRC, integrity tag, parse) or belongs to another job,
//     rank, vector length, shard layout, scheme, optimizer or local state's size: an error naming the
//     file and the field (DataLoss or FailedPrecondition), nothing changed; the caller decides
//     whether to go on.
// DiscardAfter(R) removes this rank's files of rounds after R: at a (re)start from round R they are
// left over from an earlier run of the job (or a trajectory a --resume abandoned), and a later
// restart must not mistake one for its own.
// A write that fails (a full disk) leaves no partial file (common/file_write.h) and is logged at once,
// naming the file; WaitSaved returns its error. A SIGTERM waits for the write in progress.
// Thread-safe for WaitSaved (every shard thread of a round waits); the rest from one thread at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/wire/file_key.h"
#include "engine/replica.h"

namespace sketchps::session {

inline constexpr char kSchemeStateMagic[8] = {'S', 'K', 'P', 'S', 'W', 'S', 'T', '1'};

// The file name of `rank`'s state after `rounds_applied` rounds (without the directory).
std::string StateFileName(std::uint32_t rank, std::uint64_t rounds_applied);
// The rounds of `rank`'s state files in `dir` (from the names alone), oldest first.
std::vector<std::uint64_t> StateFileRounds(const std::string& dir, std::uint32_t rank);
// Whether the file at `path` passes the framing checks (magic, length, CRC, integrity tag under
// `key`); the error names the file (IsDamagedFile / IsKeyError tell why).
absl::Status CheckStateFile(const std::string& path, const FileKey* key);

// A worker's state outside the Replica that the state files carry (worker/local_steps.h implements it
// for the inner optimizer of train.inner_state keep). local_size() is fixed for the worker's life.
class WorkerLocalState {
 public:
  virtual ~WorkerLocalState() = default;
  virtual std::vector<float> SaveLocal() const = 0;  // local_size() values
  virtual std::uint64_t local_size() const = 0;
  // Called with local_size() values only; on an error nothing has changed.
  virtual absl::Status RestoreLocal(const std::vector<float>& state) = 0;
};

struct StateRestore {
  bool restored = false;
  std::uint64_t first_round = 0;  // where the worker starts: R, or R - 1 to replay it
  std::string note;               // what was loaded, or why nothing was (for the worker's log)
};

class SchemeStateFiles {
 public:
  // `dim`: the whole vector's length; `checkpoint_every`: the job's checkpoint.every_rounds; `key`:
  // the checkpoint key (null: untagged files).
  // Installs WaitForWritesOnTermination (common/file_write.h): a SIGTERM lets a write end first.
  SchemeStateFiles(std::string dir, std::string job_id, std::uint32_t rank, std::uint64_t dim,
                   std::uint64_t checkpoint_every, std::shared_ptr<const FileKey> key = nullptr);

  // The file name of round `rounds_applied` (without the directory).
  std::string FileName(std::uint64_t rounds_applied) const;
  // The worker's local state that SaveAsync saves and Restore restores (null: none, an empty field);
  // set before the first Restore and kept alive while this object is used.
  void SetLocal(WorkerLocalState* local) { local_ = local; }
  // `params`: the whole vector (dim floats) after `rounds_applied` rounds; read before SaveAsync
  // returns (the file is written from a copy).
  void SaveAsync(std::uint64_t rounds_applied, Replica& replica, const float* params);
  // The pending write's outcome (OK when there is none); the error names the file.
  absl::Status WaitSaved();
  absl::StatusOr<StateRestore> Restore(std::uint64_t rounds_applied, Replica& replica, float* params,
                                       bool from_file = false) const;
  void DiscardAfter(std::uint64_t rounds_applied) const;

 private:
  // What SaveAsync copies for the writer's thread.
  struct Snapshot {
    std::vector<float> weights;
    std::vector<SchemeState> schemes;
    std::vector<std::string> scheme_names;
    std::vector<std::vector<float>> optimizers;
    std::vector<std::vector<float>> carried;  // Scheme::CarriedGradient, by shard
    std::vector<float> local;                 // WorkerLocalState::SaveLocal (empty without one)
  };
  absl::Status Write(std::uint64_t rounds_applied, const Snapshot& snapshot) const;
  // Logs a failed write when it happens (then every 100th in a row), and the first success after.
  void Report(std::uint64_t rounds_applied, const absl::Status& written);
  void RemoveSuperseded(std::uint64_t newest) const;
  // Loads and checks the file of round `round` and puts it into the replica (and params when
  // `with_params`); on an error nothing has changed.
  absl::Status Load(std::uint64_t round, Replica& replica, float* params, bool with_params) const;
  // Puts every shard's scheme state and carried gradient into the replica, or none of them (the
  // error names the file and the shard).
  static absl::Status RestoreSchemes(Replica& replica, const std::vector<SchemeState>& schemes,
                                     const std::vector<std::vector<float>>& carried, const std::string& path);

  std::string dir_;
  std::string job_id_;
  std::uint32_t rank_;
  std::uint64_t dim_;
  std::uint64_t every_;
  std::shared_ptr<const FileKey> key_;
  WorkerLocalState* local_ = nullptr;
  std::atomic<std::uint64_t> failures_{0};  // writes that failed in a row
  absl::Mutex mu_;
  std::shared_future<absl::Status> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sketchps::session
