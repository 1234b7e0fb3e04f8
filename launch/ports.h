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

}  // namespace sketchps::launch
