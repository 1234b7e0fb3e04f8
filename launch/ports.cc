#include "launch/ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace sketchps::launch {

absl::StatusOr<PortReport> AwaitPortFile(Child& child, const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    auto ports = ReadPortFile(path);
    if (ports.ok() || ports.status().code() != absl::StatusCode::kNotFound) return ports;
    if (auto status = child.Poll()) {
      return absl::UnavailableError(absl::StrCat(child.name(), " exited with code ", *status,
                                                 " before it reported its ports; last log lines:\n",
                                                 child.LogTail(10)));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(child.name(), " reported no ports in ", absl::FormatDuration(timeout), " (", path, ")"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::StatusOr<int> FreeLocalPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError("cannot open a socket to find a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  if (!ok) return absl::UnavailableError("cannot bind 127.0.0.1:0 to find a free port");
  return static_cast<int>(ntohs(addr.sin_port));
}

}  // namespace sketchps::launch
