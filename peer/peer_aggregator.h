// PeerAggregator: the decentralized implementation of sketchps::Aggregator. The workers run every
// phase as a collective among themselves over the Peer service (peer/service.h), with the schedule
// of peer/schedule.h and the partial states of peer/partial.h:
//
//   kDenseSum, kSketchRecover,  recursive-doubling all-reduce (sum, fixed order), then the PS
//   kSketchMomentumError        Reducer's post-processing on the sum (sketch recovery, indexed keep-k;
//                               FetchSGD's momentum and error sketches, which every rank's per-shard
//                               Reducer keeps as a bitwise-identical replica: the same summed table
//                               goes through the same code on every rank. A new aggregator (a regroup)
//                               starts them from zero on every member, as every scheme's worker state)
//   kSparseSum                  recursive-doubling all-gather, then the Reducer in worker-id order
//                               (bitwise the PS result); with PeerConfig::sparse_tree_merge and keep > 0 the
//                               gTop-k tree merge instead
//   kLeaderIndexSet             the leader's set travels with an all-reduce of the contributor count
//
// Every worker gets the bitwise-same PhaseResult. Compared with the PS: all-gathers and the leader
// set are bitwise equal for every P; sums are bitwise equal for P = 2 and equal within float rounding
// otherwise (the PS adds in worker order, peers pairwise: ((w0+w2)+w1) for P = 3).
//
// Usage (one per worker; the peer server must already listen, every rank's address known):
//   auto server = PeerServer::Start(listen, config);
//   auto agg = PeerAggregator::Create(server->endpoint(), peers);  // peers[r] = rank r's address
//
// Failure: every send is bounded by config.peer_timeout and every wait at step s by peer_timeout +
// s * 0.5 s (so the rank next to a silent peer detects it first; see below). A peer that does not
// accept a step or does not deliver the step this rank waits for fails RunPhase with UNAVAILABLE
// naming its rank and address; a peer that rejects or sends an invalid step fails it with that code
// (INVALID_ARGUMENT). The failing rank tells every other peer (abort notice), so they fail at once
// with the same cause instead of waiting. A send is retried (same request: idempotent) while the
// peer is unreachable or its mailbox full, until the timeout. After a failure the aggregator can go
// on with later phases; membership changes use a new endpoint (PeerServer::Reset) and a new
// aggregator.
//
// RunPhase may be called concurrently for different shards; calls for one shard must not overlap.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/aggregator.h"
#include "engine/reduce.h"
#include "peer/service.h"

namespace sketchps::peer {

struct PeerShardCounters {
  std::uint64_t wire_up = 0;    // serialized ExchangeRequest bytes sent (every attempt)
  std::uint64_t wire_down = 0;  // serialized bytes of the steps received
  std::uint64_t raw_up = 0;     // raw payload bytes of the partial states sent (RawPayloadBytes)
  std::uint64_t raw_down = 0;   // raw payload bytes of the partial states received
  std::uint64_t messages = 0;   // steps sent
  double seconds = 0;           // wall time inside sends and waits
};

struct PeerCounters {
  std::uint64_t wire_up = 0, wire_down = 0, raw_up = 0, raw_down = 0, messages = 0;
  std::vector<PeerShardCounters> shards;
};

class PeerAggregator final : public Aggregator {
 public:
  // InvalidArgument when `peers` does not hold one "host:port" per worker.
  static absl::StatusOr<std::unique_ptr<PeerAggregator>> Create(std::shared_ptr<Endpoint> endpoint,
                                                                std::vector<std::string> peers);
  ~PeerAggregator() override;

  absl::StatusOr<std::shared_ptr<const PhaseResult>> RunPhase(std::uint32_t shard, std::uint64_t round,
                                                              std::uint32_t phase, Contribution contribution) override;
  std::uint32_t worker_id() const override { return config().rank; }
  std::uint32_t num_workers() const override { return config().num_workers; }
  const PeerConfig& config() const { return endpoint_->config; }

  // Safe to call at any time (counters are atomic per shard).
  PeerCounters counters() const;

  // Probes every other rank (waiting up to `timeout` for it to listen) and compares its job
  // fingerprint with this rank's: FailedPrecondition naming the rank and the keys that differ,
  // Unavailable naming a rank that never answered.
  absl::Status CheckPeers(absl::Duration timeout);

 private:
  struct ShardState;
  struct PeerLink {
    std::string address;
    std::unique_ptr<v1::Peer::Stub> stub;
  };
  explicit PeerAggregator(std::shared_ptr<Endpoint> endpoint);

  absl::StatusOr<PhaseResult> RunCollective(ShardState& st, const PhaseRef& ref, const Contribution& own);
  absl::Status Send(ShardState& st, std::uint32_t to, const v1::ExchangeRequest& request);
  absl::StatusOr<Letter> Receive(ShardState& st, const PhaseRef& ref, std::uint32_t step, std::uint32_t from,
                                 const PhaseSpec& spec);
  void AbortPeers(const PhaseRef& ref, const absl::Status& why);
  v1::ExchangeRequest Header(const PhaseRef& ref) const;
  std::string Name(std::uint32_t rank) const;

  std::shared_ptr<Endpoint> endpoint_;
  std::vector<PeerLink> links_;
  std::vector<std::unique_ptr<ShardState>> shards_;
};

}  // namespace sketchps::peer
