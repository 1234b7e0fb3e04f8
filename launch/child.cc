#include "launch/child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace sketchps::launch {

absl::StatusOr<Child> Child::Start(std::string name, std::vector<std::string> argv, const std::string& log_path,
                                   const std::vector<std::string>& env) {
  if (argv.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": empty command"));
  if (access(argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(name, ": ", argv[0], " is not an executable file (build it first)"));
  }
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0)
    return absl::InternalError(absl::StrCat(name, ": cannot open log ", log_path, ": ", std::strerror(errno)));
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return absl::InternalError(absl::StrCat(name, ": fork failed: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // Child: own process group, default signal disposition and mask, output to the log.
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    for (const auto& kv : env) putenv(const_cast<char*>(kv.c_str()));
    execv(args[0], args.data());
    _exit(127);
  }
  close(log_fd);
  Child child;
  child.name_ = std::move(name);
  child.argv_ = std::move(argv);
  child.log_path_ = log_path;
  child.pid_ = pid;
  return child;
}

Child::Child(Child&& other) noexcept { *this = std::move(other); }

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    name_ = std::move(other.name_);
    argv_ = std::move(other.argv_);
    log_path_ = std::move(other.log_path_);
    pid_ = std::exchange(other.pid_, -1);
    status_ = other.status_;
  }
  return *this;
}

Child::~Child() {
  if (pid_ > 0 && !Poll()) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

std::optional<int> Child::Poll() {
  if (status_ || pid_ <= 0) return status_;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return status_;
}

void Child::Signal(int signal) {
  if (pid_ > 0 && !Poll()) kill(pid_, signal);
}

int Child::Stop(absl::Duration grace) {
  Signal(SIGTERM);
  const absl::Time end = absl::Now() + grace;
  while (!Poll() && absl::Now() < end) absl::SleepFor(absl::Milliseconds(20));
  if (!Poll()) {
    Signal(SIGKILL);
    while (!Poll()) absl::SleepFor(absl::Milliseconds(5));
  }
  return *status_;
}

void StopTogether(const std::vector<Child*>& children, absl::Duration grace) {
  for (Child* c : children) c->Signal(SIGTERM);
  const auto running = [&] {
    return std::any_of(children.begin(), children.end(), [](Child* c) { return !c->Poll(); });
  };
  const absl::Time end = absl::Now() + grace;
  while (running() && absl::Now() < end) absl::SleepFor(absl::Milliseconds(20));
  for (Child* c : children) c->Signal(SIGKILL);
  while (running()) absl::SleepFor(absl::Milliseconds(5));
}

std::string Child::LogTail(int lines) const {
  std::ifstream in(log_path_);
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(line);
    if (static_cast<int>(tail.size()) > lines) tail.pop_front();
  }
  return absl::StrJoin(tail, "\n");
}

std::string SelfExecutable() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

}  // namespace sketchps::launch
