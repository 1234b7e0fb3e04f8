// PeerConfig: what a worker's peer server and peer aggregator know about the decentralized job.
// Every peer of one epoch must use the same values except `rank`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/net/tls.h"
#include "common/wire/fingerprint.h"

namespace sketchps::peer {

struct PeerConfig {
  std::string job_id;
  std::uint64_t epoch = 0;  // bump on membership change: older messages are refused
  std::uint32_t rank = 0;   // this worker, in [0, num_workers)
  std::uint32_t num_workers = 1;
  std::vector<std::uint64_t> range_lengths;  // per shard of the flat vector (ShardMap sizes)
  // kSparseSum phases with keep > 0 (gTop-k) use the tree merge (log2 P merges of top-k sets)
  // instead of an all-gather reduced like the PS (exact global top-k). See docs/design-notes.md.
  bool sparse_tree_merge = false;
  // Longest this worker waits for one peer: to accept one step, or to deliver the step this worker
  // waits for (plus 0.5 s per step index). A peer silent for longer fails the phase with UNAVAILABLE
  // naming it. It must cover the spread of the workers' compute times within a round.
  absl::Duration peer_timeout = absl::Seconds(60);
  // Largest gRPC message sent or accepted; 0: MaxLetterBytes() (derived from the ranges and P).
  int max_message_bytes = 0;
  TlsConfig tls;  // common/net/tls.h: mutual TLS with worker identities, or insecure
  // The certificate identity of each rank of this epoch ("worker-<identities[r]>"): a regroup
  // renumbers ranks but certificates keep the rank a worker had when the job started. Empty: rank r
  // is worker-r.
  std::vector<std::uint32_t> identities;
  Fingerprint fingerprint;  // the job's (common/wire/fingerprint.h); peers compare it at start

  // The identity index of `rank` (identities[rank], or rank itself).
  std::uint32_t IdentityOf(std::uint32_t rank) const { return identities.empty() ? rank : identities.at(rank); }
  // The TLS identity a channel to `rank` must reach ("worker-<IdentityOf(rank)>"; "" when insecure).
  std::string ExpectedName(std::uint32_t rank) const;
  // max_message_bytes when set, else the largest legal letter: every rank's contribution to the
  // largest range as sparse entries (at most 16 bytes each) plus a sketch table of 8 float32 cells
  // per element, plus 64 KiB of framing, at most 2047 MiB.
  int MessageLimit() const;
};

// InvalidArgument naming the field ("peer.rank: 4 is not in [0, 4)").
absl::Status ValidatePeerConfig(const PeerConfig& config);

}  // namespace sketchps::peer
