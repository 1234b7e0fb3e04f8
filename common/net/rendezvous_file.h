// Rendezvous through small files, for processes started by one launcher on one machine
// (`sketchps run`): a daemon that listens on port 0 writes the port it got (WriteFileAtomically,
// common/file_write.h), and a worker that needs every peer's address waits for the list the launcher
// writes once all ports are known (WaitForFile). Binding port 0 leaves no window in which another
// process can take a port chosen in advance.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/file_write.h"  // WriteFileAtomically: what the writers use

namespace sketchps {

// The content of `path` once it exists, polling every 20 ms; DeadlineExceeded naming the file after
// `timeout`.
absl::StatusOr<std::string> WaitForFile(const std::string& path, absl::Duration timeout);

}  // namespace sketchps
