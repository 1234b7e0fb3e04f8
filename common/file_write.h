// Writing files so that neither a write error nor a stop signal leaves a partial one behind.
//
//   WriteFileAtomically(path, bytes)   the bytes go to "<path>.tmp", which is closed (and with
//                                      kSurvivesPowerLoss fsynced) and renamed over `path`. Every
//                                      step is checked; on any failure the temporary file is removed
//                                      and the error names the file and the system's reason
//                                      ("<path>.tmp: write failed: No space left on device"), so a
//                                      full disk leaves the old file (or none), never a torn one.
//   AppendOnlyFile                     one record at a time appended to a file (JSON lines): a record
//                                      is written whole or not at all. A failed append cuts the file
//                                      back to its length before it, so no reader ever sees half a
//                                      record, and returns the error naming the file.
// Every write holds a TerminationWaitsForThis (common/termination.h): in a process that called
// WaitForWritesOnTermination, a SIGTERM lets it finish before the process dies.
//
// Durability: kSurvivesPowerLoss fsyncs the file before the rename and the directory after it;
// kSurvivesProcessKill leaves both out (the rename is still atomic, so a killed process leaves a
// whole file, but a power loss may lose the newest one): for state rewritten every round.
// Thread-safe: different files from different threads; one AppendOnlyFile from one thread at a time.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/termination.h"  // WaitForWritesOnTermination, for the writers' callers

namespace sketchps {

enum class Durability { kSurvivesPowerLoss, kSurvivesProcessKill };

// `mode`: the new file's permission bits (0600 for checkpoints and state files).
absl::Status WriteFileAtomically(const std::string& path, const std::string& content,
                                 Durability durability = Durability::kSurvivesProcessKill, unsigned mode = 0644);

class AppendOnlyFile {
 public:
  AppendOnlyFile() = default;
  AppendOnlyFile(const AppendOnlyFile&) = delete;
  AppendOnlyFile& operator=(const AppendOnlyFile&) = delete;
  ~AppendOnlyFile();

  // Opens (creates) `path` for appending. The error names the file.
  absl::Status Open(const std::string& path);
  // Appends `record` whole, or not at all (the file is cut back on a failure). Not opened: OK.
  absl::Status Append(const std::string& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace sketchps
