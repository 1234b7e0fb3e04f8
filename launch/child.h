// Child processes for the launchers (sketchps run, loadgen): start a program with its output appended to a log file,
// poll whether it exited, signal it, read the end of its log.
//
// A Child is owned by one thread. Destroying a Child that still runs kills it (SIGKILL) and reaps
// it, so a launcher that fails never leaves processes behind.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sketchps::launch {

class Child {
 public:
  // Starts argv[0] (a path) with argv, stdout and stderr appended to log_path, stdin /dev/null, in
  // its own process group, with this process's environment plus `env` ("NAME=value", overriding).
  // Errors: the program does not exist or is not executable, the log file cannot be opened.
  static absl::StatusOr<Child> Start(std::string name, std::vector<std::string> argv, const std::string& log_path,
                                     const std::vector<std::string>& env = {});

  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  const std::string& name() const { return name_; }
  const std::vector<std::string>& argv() const { return argv_; }
  const std::string& log_path() const { return log_path_; }
  pid_t pid() const { return pid_; }

  // The exit status once the process has ended: its exit code, or 128 + signal number. Non-blocking.
  std::optional<int> Poll();
  // Sends `signal` if the process still runs.
  void Signal(int signal);
  // SIGTERM, wait up to `grace`, then SIGKILL; returns the exit status.
  int Stop(absl::Duration grace);
  // The last `lines` lines of the log file.
  std::string LogTail(int lines) const;

 private:
  Child() = default;
  std::string name_;
  std::vector<std::string> argv_;
  std::string log_path_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// Stops `children` at once (a failed run's teardown): SIGTERM to every one that still runs, then
// SIGKILL to those still running after `grace`. Returns once every one has exited.
void StopTogether(const std::vector<Child*>& children, absl::Duration grace);

// Path of the running executable (/proc/self/exe).
std::string SelfExecutable();

}  // namespace sketchps::launch
