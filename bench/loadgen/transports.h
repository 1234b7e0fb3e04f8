// The P workers' transports of one load-generator configuration, built as a job builds them:
//
//   ConnectWorkers     ps: one ps::ConnectParameterServers per worker (its own channels to
//                      every shard, the job's fingerprint sent with each Join);
//   StartPeerWorkers   decentralized: one peer::StartPeers per worker, each Peer service on a
//                      port of its own choosing (127.0.0.1:0), then the same file rendezvous as
//                      `sketchps run` (every rank writes its port, the list of addresses follows);
//   StartTreePeers     decentralized gtopk_tree (tree_peers.h).
//
// Every transport is plaintext on loopback (TlsConfig's in-process default): bytes are counted as
// serialized messages, so TLS would change the CPU load, not the figures. Regrouping is off: a lost
// peer fails the configuration. Start() (Join / the peers' fingerprint check) is left to the
// caller, which runs it on the workers' threads. Errors name the worker.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/layout.h"
#include "engine/transport.h"
#include "job/job_spec.h"

namespace sketchps::bench {

using Transports = std::vector<std::unique_ptr<Transport>>;

// `addresses`: every shard's "host:port", in shard order.
absl::StatusOr<Transports> ConnectWorkers(const JobSpec& job, const std::vector<std::string>& addresses);

// `dir`: where the port files and the address list go (created by the caller).
absl::StatusOr<Transports> StartPeerWorkers(const JobSpec& job, const ShardMap& shards, const std::string& dir);

}  // namespace sketchps::bench
