// Transport: how a worker's rounds reach the other workers. The training loop (trainer.h) is the
// same for the parameter servers (ps/transport.h) and, in decentralized
// mode, the peers (peer/transport.h); only the Transport differs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/layout.h"
#include "engine/aggregator.h"
#include "engine/replica.h"

namespace sketchps {

struct TransportCounters {
  std::uint64_t wire_up = 0;    // serialized bytes this worker sent
  std::uint64_t wire_down = 0;  // serialized bytes it received
  // Raw payload bytes sent and received, when the transport's traffic differs from the phase
  // payloads themselves (the peers' collectives forward partial sums); else the trainer counts the
  // phase payloads (engine/round.h).
  bool counts_raw = false;
  std::uint64_t raw_up = 0, raw_down = 0;
  std::vector<double> seconds;  // per shard: wall time inside the transport's calls
};

// A new membership after a regroup (decentralized mode).
struct Regrouped {
  std::uint64_t epoch = 0;    // membership epoch
  std::uint32_t rank = 0;     // this worker's new rank
  std::uint32_t workers = 1;  // survivors
  std::uint64_t round = 0;    // the round every survivor restarts from
  std::uint32_t lost = 0;     // ranks left out
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Once, before the first round: agrees on the starting point. May overwrite `params` (the whole
  // flat vector) and the replica's optimizer state with the authoritative copy; returns the first
  // round to run.
  // Parameter servers: the shards may be one round apart (a worker killed after some shards applied
  // a round and before the others did); Start then returns the lower round and shards_ahead() is
  // true: the worker must replay that round from its own saved state (session/scheme_state_file.h),
  // because params then hold ranges of two different rounds.
  virtual absl::StatusOr<std::uint64_t> Start(const LayerTable& layers, const ShardMap& shards, float* params,
                                              Replica& replica) = 0;
  virtual bool shards_ahead() const { return false; }
  virtual Aggregator& aggregator() = 0;
  // After round `round` was applied to `params`: FailedPrecondition containing "replica diverged"
  // when the replica differs from the authoritative copy (where there is one to compare with).
  virtual absl::Status CheckReplica(std::uint64_t round, const ShardMap& shards, const float* params) = 0;
  // After round `next_round` failed with `failure`: agrees with the other survivors on a new
  // membership and switches to it. Returns `failure` itself when this transport does not regroup
  // (parameter servers, peer.on_failure: stop, or a failure other than a lost peer).
  virtual absl::StatusOr<Regrouped> Regroup(const absl::Status& failure, std::uint64_t next_round) { return failure; }
  // After the job's last round (and evaluation), with this worker's rounds: tells the aggregation side
  // the worker is done (parameter servers exit once every worker has). Best effort for the caller.
  virtual absl::Status Finish(std::uint64_t rounds_applied) { return absl::OkStatus(); }
  // Instead of Finish, when the worker stops on an error (`reason`): tells the aggregation side it
  // failed, so that it is not taken for finished. Best effort and prompt: one attempt per server,
  // within a few seconds (the peers of decentralized mode notice a lost peer by themselves).
  virtual absl::Status ReportFailure(std::uint64_t rounds_applied, const std::string& reason) {
    return absl::OkStatus();
  }
  // The rounds `shard` had applied at its last answer (parameter servers; 0 where unknown): a worker
  // that a round deadline left behind catches up on the rounds the shards already closed.
  virtual std::uint64_t shard_rounds(std::uint32_t shard) const { return 0; }
  // Elastic membership (ps.elastic): the slots that were not members of the last round this worker
  // completed (sorted; shard 0's answer). Empty for a fixed membership.
  virtual std::vector<std::uint32_t> round_absent() const { return {}; }
  // Cumulative within one membership; call between rounds.
  virtual TransportCounters counters() const = 0;
};

}  // namespace sketchps
