// The decentralized Transport: this worker's Peer server (peer/service.h) and a PeerAggregator over
// every rank's address. Every worker starts from the same seeded initial weights at round 0; there is
// no authoritative copy, so CheckReplica checks nothing (every collective gives every rank the same
// bits by construction; tests/peer pins this).
//
// Regroup (options.regroup): a round that failed with UNAVAILABLE (a peer did not answer within
// peer_timeout, or a peer's abort notice for that reason) runs the agreement of peer/regroup.h with
// window = peer_timeout + 10 s, then re-arms the Regrouper, resets the Peer server to the new epoch
// and builds a new aggregator over the members' addresses. Any other failure is returned as is.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/layout.h"
#include "common/net/worker_link.h"
#include "engine/transport.h"

namespace sketchps::peer {

// WorkerLink (common/net/worker_link.h): job_id, rank, num_workers, patience (the longest wait for
// peers_file), tls (this worker's identity is worker-<rank>), fingerprint (every peer's must be equal,
// checked at Start).
struct PeerOptions : WorkerLink {
  std::string listen;              // this worker's Peer service, "host:port" (port 0: any free one)
  std::vector<std::string> peers;  // every rank's address, in rank order
  std::string port_file;           // when set: the port this worker's Peer service got is written here
  std::string peers_file;          // when `peers` is empty: wait for this file (addresses, comma-separated)
  absl::Duration peer_timeout = absl::Seconds(60);
  bool regroup = true;  // job.peer.on_failure == "regroup"
};

absl::StatusOr<std::unique_ptr<Transport>> StartPeers(const PeerOptions& options, const ShardMap& shards);

}  // namespace sketchps::peer
