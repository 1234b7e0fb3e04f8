// The parameter-server Transport: Join every shard (taking its weights, momentum and round), run
// phases through Client, and check the replica against each shard's reported checksum after every
// round.
#pragma once

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "engine/transport.h"
#include "ps/client.h"

namespace sketchps::ps {

// `join_at` (elastic membership, job key ps.elastic): Start joins the running job as a member from that
// round, or the first one after it every shard can hold for it, instead of starting it.
absl::StatusOr<std::unique_ptr<Transport>> ConnectParameterServers(ClientOptions options,
                                                                   std::optional<std::uint64_t> join_at = std::nullopt);

}  // namespace sketchps::ps
