// CheckpointWriter: writes a shard's checkpoints on a thread of its own, so that the file I/O and
// its fsyncs never hold up a round.
//
//   CheckpointWriter writer(dir, on_written, key);  // key: null, or the checkpoint key (tagged files)
//   writer.Submit(std::move(checkpoint));   // returns at once
//   writer.Flush();                         // waits until everything submitted is on disk
//
// The writer keeps at most one checkpoint waiting: a Submit while an older one waits replaces it
// (only the newest state matters; what is not yet on disk a restarted shard recovers from the
// workers' replicas, docs/protocol.md "Restart recovery"). Each write is atomic (checkpoint.h);
// failures are reported to `on_written` and logged, never fatal. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/wire/file_key.h"
#include "sketchps/v1/checkpoint.pb.h"

namespace sketchps::ps {

class CheckpointWriter {
 public:
  // Called on the writer's thread after each attempt with its outcome and duration in seconds.
  using Done = std::function<void(const v1::ShardCheckpoint&, const absl::Status&, double seconds)>;

  CheckpointWriter(std::string dir, Done done, std::shared_ptr<const FileKey> key = nullptr);
  ~CheckpointWriter();  // writes what waits, then stops

  void Submit(v1::ShardCheckpoint checkpoint);
  // Waits until every checkpoint submitted so far has been written (or failed); returns the status
  // of the last write (OK when nothing was written).
  absl::Status Flush();

 private:
  void Loop();

  const std::string dir_;
  const Done done_;
  const std::shared_ptr<const FileKey> key_;
  absl::Mutex mu_;
  std::optional<v1::ShardCheckpoint> pending_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status last_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace sketchps::ps
