// Decentralized gTop-k with the peers' tree merge (PeerConfig::sparse_tree_merge: log2 P merges of top-k
// sets, the paper's traffic) for the load generator. No job key selects it and peer::StartPeers
// leaves it off, so this builds what StartPeers builds (a PeerServer and a PeerAggregator per rank,
// on 127.0.0.1:0, plaintext) with that one option on. Start() compares the peers' job fingerprints
// as a job does; there is no regrouping.
#pragma once

#include "absl/status/statusor.h"
#include "bench/loadgen/transports.h"
#include "common/layout.h"
#include "job/job_spec.h"

namespace sketchps::bench {

// One transport per rank of `job.workers`. Errors: a peer server that cannot listen, naming its rank.
absl::StatusOr<Transports> StartTreePeers(const JobSpec& job, const ShardMap& shards);

}  // namespace sketchps::bench
