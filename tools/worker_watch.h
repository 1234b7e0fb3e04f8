// WorkerWatch: how `sketchps run --servers-only` notices a rank that failed. The ranks are another
// launcher's (torchrun), not this process's children, so their exit codes never reach it. Each
// Python rank writes a status file, <out>/worker-<rank>.status (SKETCHPS_STATUS_FILE of
// workers.env; python/sketchps/torch.py), first thing in sketchps.torch.init():
//
//   pid=<pid>
//   host=<hostname>
//   left=<round R of N>        once it has left the job (finish())
//   failed=<reason>            when it stopped on an error (an exception, a script that ended early
//                              without finish(): the exception or the reason, one line)
//
// A rank on this host whose process is gone without a "left=" line has failed: the launcher names
// it with the reason it wrote (or says it was killed, or ended without leaving), stops the servers
// and exits 1, instead of waiting for a worker that will never call. Ranks on other hosts (their
// host line differs) are not watched. Lines are read only when complete (a newline after them).
// Not thread-safe; the launcher polls it from its monitor loop.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace sketchps::tools {

class WorkerWatch {
 public:
  explicit WorkerWatch(std::filesystem::path out) : out_(std::move(out)) {}

  // Removes the status files of an earlier run in the run directory (a --resume'd one), whose
  // processes are gone: they would read as failed ranks.
  void Clear() const;

  // "rank R (pid P) <what happened>" for every rank on this host whose process is gone without
  // having left the job, joined by "; ", or nullopt when there is none.
  std::optional<std::string> Lost() const;

 private:
  std::filesystem::path out_;
};

}  // namespace sketchps::tools
