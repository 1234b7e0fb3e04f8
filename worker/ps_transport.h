// The parameter-server Transport: Join every shard (taking its weights, momentum and round), run
// phases through ps::Client, and check the replica against each shard's reported checksum after every
// round.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "ps/client.h"
#include "worker/transport.h"

namespace sketchps::worker {

absl::StatusOr<std::unique_ptr<Transport>> ConnectParameterServers(ps::ClientOptions options);

}  // namespace sketchps::worker
