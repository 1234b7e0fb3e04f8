// Client: the parameter-server side of the Aggregator interface. One gRPC channel per shard;
// RunPhase pushes this worker's contribution to the shard and returns the phase result.
//
// Join offers the worker's replica of a shard's range (ps/assembly.h): fresh workers their
// initial weights at round 0. A shard that restarted answers pushes with IsRejoin (it is assembling
// its state): RunPhase then joins again, offering the replica as it stands at the start of the
// round (weights and momentum from the OfferFn, the round, and the final result of the previous
// round it received from that shard), and retries the push once the shard serves again.
//
// Retries (the push is idempotent per (epoch, worker, shard, round, phase), so resending is safe):
// UNAVAILABLE (server down or restarting) and DEADLINE_EXCEEDED (the phase waited longer than one
// attempt's rpc_timeout) are retried with backoff (50 ms doubling to 1 s) until the shard has failed
// continuously for `patience`; then RunPhase returns UNAVAILABLE naming the shard and its address.
// No attempt outlasts the patience (its deadline is the earlier of the two).
// Other errors are returned at once (IsReplayRound ones are handled by RunRound).
//
// A response with `excluded` set (a round deadline closed the phase without this worker) yields a
// PhaseResult whose `excluded` lists this worker (engine/round.h then fetches the final result).
//
// RunPhase may be called concurrently for different shards (Replica runs shards in parallel); calls
// for the same shard must not overlap. Byte and time counters cover every attempt.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/layout.h"
#include "common/net/worker_link.h"
#include "engine/aggregator.h"
#include "sketchps/v1/parameter_server.grpc.pb.h"

namespace sketchps::ps {

// WorkerLink (common/net/worker_link.h): job_id, rank, num_workers, patience (continuous failure
// before giving up), tls (shard s must prove server-<s>), fingerprint (sent with every Join).
struct ClientOptions : WorkerLink {
  std::vector<std::string> servers;                // "host:port" of shard 0, 1, ...
  absl::Duration rpc_timeout = absl::Seconds(20);  // one attempt
  int max_message_bytes = 256 << 20;
};

// A worker's replica of one shard's range, as offered in a Join.
struct ReplicaOffer {
  std::vector<float> weights;          // a host copy (the replica itself may live on a GPU)
  std::vector<float> optimizer_state;  // empty: none
};
// Returns the replica of `shard` as it stands now (called from the thread running that shard).
using OfferFn = std::function<ReplicaOffer(std::uint32_t shard)>;

// What the server reported with a round's final phase result.
struct FinalReport {
  std::uint64_t rounds_applied = 0;
  std::uint64_t checksum = 0;
  std::vector<std::uint32_t> absent;  // elastic membership: the round's non-members (sorted)
};

struct ClientCounters {
  std::uint64_t wire_up = 0;        // serialized request bytes
  std::uint64_t wire_down = 0;      // serialized response bytes
  std::vector<double> rpc_seconds;  // per shard: wall time inside its RPCs
};

class Client final : public Aggregator {
 public:
  static absl::StatusOr<std::unique_ptr<Client>> Connect(ClientOptions options);

  // Joins `shard` (retrying while it is unreachable or assembling, within the patience): offers the
  // layer table and this worker's replica of the shard's range at `rounds_applied` rounds.
  // With `member_from` (elastic membership, job key ps.elastic): joins the running job as a member from
  // that round or the first one after it the shard can hold for it; the shard answers once it has
  // applied every round before it (JoinResponse.member_from, proto/.../parameter_server.proto).
  absl::StatusOr<v1::JoinResponse> Join(std::uint32_t shard, std::uint64_t rounds_applied, const ReplicaOffer& replica,
                                        std::optional<std::uint64_t> member_from = std::nullopt);
  // Sets the layout every Join offers and the source of the offers RunPhase makes after a shard
  // restarted. Call before the first Join.
  void SetReplica(LayerTable layers, OfferFn offer);
  // `rounds_only`: the response holds rounds_applied only (no weights).
  absl::StatusOr<v1::GetWeightsResponse> GetWeights(std::uint32_t shard, bool rounds_only = false);
  // The rounds `shard` has applied (a GetWeights without the weights).
  absl::StatusOr<std::uint64_t> RoundsApplied(std::uint32_t shard);
  // Tells `shard` this worker has finished the job with `rounds_applied` rounds.
  absl::Status Leave(std::uint32_t shard, std::uint64_t rounds_applied);
  // Tells `shard` this worker stops on an error (a Leave with `failed`): one attempt within
  // `timeout`, not retried (the shard may be what failed). Thread-safe with a RunPhase in flight.
  absl::Status ReportFailure(std::uint32_t shard, std::uint64_t rounds_applied, const std::string& reason,
                             absl::Duration timeout);

  absl::StatusOr<std::shared_ptr<const PhaseResult>> RunPhase(std::uint32_t shard, std::uint64_t round,
                                                              std::uint32_t phase, Contribution contribution) override;
  std::uint32_t worker_id() const override { return options_.rank; }
  std::uint32_t num_workers() const override { return options_.num_workers; }
  std::uint32_t num_shards() const { return static_cast<std::uint32_t>(links_.size()); }

  // The server's report for the last final phase on `shard`.
  FinalReport last_final(std::uint32_t shard) const;
  // The rounds `shard` had applied when it last answered a push (0 before any): a worker that a round
  // deadline left behind sees that the shards are ahead (engine/round.h FetchRound).
  std::uint64_t shard_rounds(std::uint32_t shard) const { return links_.at(shard).shard_rounds; }
  // (Read it between rounds: the shard's thread writes it.)
  // Call between rounds (not while RunPhase runs on another thread).
  ClientCounters counters() const;
  // Sets the range length of `shard` (from Join): results are decoded within it.
  void set_range_length(std::uint32_t shard, std::uint64_t length);

 private:
  // The LeaveRequest of this worker for `shard` (InvalidArgument: no such shard).
  absl::StatusOr<v1::LeaveRequest> LeaveRequestFor(std::uint32_t shard, std::uint64_t rounds_applied) const;
  struct ShardLink {
    std::string address;
    std::unique_ptr<v1::ParameterServer::Stub> stub;
    std::uint64_t range_len = 0;
    FinalReport final;
    v1::Payload last_final;  // the last final phase result received (offered at a rejoin)
    std::uint32_t last_contributors = 0;
    double rpc_seconds = 0;          // written only by the thread running this shard's calls
    std::uint64_t shard_rounds = 0;  // the shard's rounds applied at its last answer (same thread rule)
  };
  explicit Client(ClientOptions options) : options_(std::move(options)) {}
  template <class Call>
  absl::Status WithRetries(std::uint32_t shard, const char* what, Call call);
  absl::StatusOr<v1::PushPullResponse> Push(std::uint32_t shard, const v1::PushPullRequest& request);
  static constexpr int kMaxRejoins = 3;

  const ClientOptions options_;
  LayerTable layers_;
  OfferFn offer_;
  std::vector<ShardLink> links_;
  std::atomic<std::uint64_t> wire_up_{0}, wire_down_{0};
};

}  // namespace sketchps::ps
