// Supervision of gRPC 1.51's accept loop (CVE-2023-4785): once accept4() fails with EMFILE, the
// listener stops accepting for good, even after descriptors are free again. New connections then
// wait in the kernel's accept queue forever while established ones keep working.
//
//   AcceptWatch watch({port}, absl::Seconds(10));
//   every second:  if (watch.Sample(absl::Now())) { log watch.Describe(); drain; exit 5 }
//
// A port whose listening socket has connections waiting to be accepted in every sample for
// `patience`, while this process could open a descriptor, is stalled; a healthy loop takes them
// within milliseconds. The queue length is the rx_queue of the LISTEN entry in /proc/self/net/tcp
// and tcp6. One thread owns an AcceptWatch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace sketchps {

// Connections waiting to be accepted on the listening TCP sockets of `port` in this process's
// network namespace (summed over IPv4 and IPv6); nullopt when no socket listens on it.
std::optional<int> AcceptQueueLength(int port);

// Whether this process is out of file descriptors (opening /dev/null fails with EMFILE or ENFILE).
bool DescriptorsExhausted();

class AcceptWatch {
 public:
  AcceptWatch(std::vector<int> ports, absl::Duration patience);

  // Samples the ports' accept queues and the descriptors; true once a port is stalled.
  bool Sample(absl::Time now);
  // True while the last sample found the descriptors exhausted; `exhaustions()` counts episodes.
  bool exhausted() const { return exhausted_; }
  int exhaustions() const { return exhaustions_; }
  // What Sample found: the stalled port, how many connections wait and for how long.
  std::string Describe() const;

 private:
  std::vector<int> ports_;
  absl::Duration patience_;
  std::vector<std::optional<absl::Time>> waiting_since_;  // per port: first of the non-empty samples
  int stalled_port_ = 0;
  int stalled_queue_ = 0;
  absl::Duration stalled_for_;
  bool exhausted_ = false;
  int exhaustions_ = 0;
};

}  // namespace sketchps
