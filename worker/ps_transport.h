// The parameter-server Transport: Join every shard (taking its weights, momentum and round), run
// phases through PsClient, and check the replica against each shard's reported checksum after every
// round.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "worker/ps_client.h"
#include "worker/transport.h"

namespace sketchps::worker {

absl::StatusOr<std::unique_ptr<Transport>> ConnectParameterServers(ClientOptions options);

}  // namespace sketchps::worker
