// The decentralized Transport: this worker's Peer server (peer/service.h) and a PeerAggregator over
// every rank's address. Every worker starts from the same seeded initial weights at round 0; there is
// no authoritative copy, so CheckReplica checks nothing (every collective gives every rank the same
// bits by construction; tests/peer pins this).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/layout.h"
#include "worker/transport.h"

namespace sketchps::worker {

struct PeerOptions {
  std::string job_id;
  std::uint32_t rank = 0;
  std::uint32_t num_workers = 1;
  std::string listen;                 // this worker's Peer service, "host:port"
  std::vector<std::string> peers;     // every rank's address, in rank order
  absl::Duration peer_timeout = absl::Seconds(60);
};

absl::StatusOr<std::unique_ptr<Transport>> StartPeers(const PeerOptions& options, const ShardMap& shards);

}  // namespace sketchps::worker
