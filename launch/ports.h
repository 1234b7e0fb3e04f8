// Learning the ports a daemon bound: from its port file (common/net/port_file.h), never from a log.
//
//   SKETCHPS_ASSIGN_OR_RETURN(PortReport ports, AwaitPortFile(server, "server-0.port", absl::Seconds(60)));
//
// Thread-safe for distinct children.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/net/port_file.h"
#include "launch/child.h"

namespace sketchps::launch {

// Waits until `child` has written the port file at `path` and returns the ports in it. Unavailable
// when the child exits first (with the last lines of its log), DeadlineExceeded after `timeout`,
// InvalidArgument for a file that is not a port file.
absl::StatusOr<PortReport> AwaitPortFile(Child& child, const std::string& path, absl::Duration timeout);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed): for a service
// a child binds itself, such as torch.distributed's MASTER_PORT. Another process may take it first.
absl::StatusOr<int> FreeLocalPort();

}  // namespace sketchps::launch
