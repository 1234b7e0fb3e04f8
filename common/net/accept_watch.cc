#include "common/net/accept_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sketchps {

namespace {

// Adds the rx_queue of every LISTEN (state 0A) entry on `port` in `path` (/proc/self/net/tcp[6]).
bool AddListenQueue(const char* path, int port, int* total) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  bool found = false;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues;
    if (!(fields >> slot >> local >> remote >> state >> queues) || state != "0A") continue;
    const auto colon = local.rfind(':');
    if (colon == std::string::npos || std::stoi(local.substr(colon + 1), nullptr, 16) != port) continue;
    const auto sep = queues.find(':');
    if (sep == std::string::npos) continue;
    found = true;
    *total += static_cast<int>(std::stoul(queues.substr(sep + 1), nullptr, 16));
  }
  return found;
}

}  // namespace

std::optional<int> AcceptQueueLength(int port) {
  int total = 0;
  const bool v4 = AddListenQueue("/proc/self/net/tcp", port, &total);
  const bool v6 = AddListenQueue("/proc/self/net/tcp6", port, &total);
  if (!v4 && !v6) return std::nullopt;
  return total;
}

bool DescriptorsExhausted() {
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return false;
  }
  return errno == EMFILE || errno == ENFILE;
}

AcceptWatch::AcceptWatch(std::vector<int> ports, absl::Duration patience)
    : ports_(std::move(ports)), patience_(patience), waiting_since_(ports_.size()) {}

bool AcceptWatch::Sample(absl::Time now) {
  const bool exhausted = DescriptorsExhausted();
  if (exhausted && !exhausted_) ++exhaustions_;
  exhausted_ = exhausted;
  bool stalled = false;
  for (std::size_t i = 0; i < ports_.size(); ++i) {
    const std::optional<int> queued = exhausted ? std::nullopt : AcceptQueueLength(ports_[i]);
    // While descriptors are exhausted no accept can succeed, whatever the loop's state: not counted.
    if (!queued || *queued == 0) {
      waiting_since_[i].reset();
      continue;
    }
    if (!waiting_since_[i]) waiting_since_[i] = now;
    if (now - *waiting_since_[i] >= patience_) {
      stalled = true;
      stalled_port_ = ports_[i];
      stalled_queue_ = *queued;
      stalled_for_ = now - *waiting_since_[i];
    }
  }
  return stalled;
}

std::string AcceptWatch::Describe() const {
  return absl::StrCat("port ", stalled_port_, " has not accepted a connection for ",
                      absl::FormatDuration(absl::Trunc(stalled_for_, absl::Seconds(1))), " (", stalled_queue_,
                      " waiting in the accept queue), after ", exhaustions_,
                      " episode(s) of file-descriptor exhaustion seen: gRPC 1.51's accept loop stops for good after "
                      "accept4() fails with EMFILE (CVE-2023-4785)");
}

}  // namespace sketchps
