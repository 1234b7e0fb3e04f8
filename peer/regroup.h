// Regrouping after a peer failure (decentralized mode): the surviving workers agree on who goes on
// and from which round, and start a new membership epoch with P' < P workers.
//
//   regrouper.Arm(config);                         // on start and after every regroup
//   auto plan = regrouper.Ask(next_round);         // a survivor, after its round failed
//   // server side: the Regroup RPC calls regrouper.Handle(request)
//
// Protocol (one coordinator per failed epoch, found without an election):
//   - A survivor asks the ranks of the failed epoch in ascending order: it probes rank c (Probe,
//     wait-for-ready, kProbeTimeout) and, when c answers, sends it Regroup(epoch, rank, next_round)
//     and waits for the decision; asking itself is a local call. A rank that does not answer the
//     probe, or fails the call with UNAVAILABLE, is skipped. So the coordinator is the lowest rank
//     the survivors can reach.
//   - The coordinator collects requests. It probes every rank that has not asked; a rank that does
//     not answer is dead. It decides when every rank has asked or is dead, or `window` after the
//     first request (ranks alive but silent are then left out).
//   - Decision: members = the ranks that asked, ascending (a member's new rank is its position);
//     round = their lowest next_round; epoch = failed epoch + 1. Instead FailedPrecondition when the
//     members are not a strict majority of the failed epoch (two disjoint groups could otherwise both
//     go on; so P = 2 cannot continue) or their next_rounds differ by more than one (collectives
//     that need every rank cannot leave them further apart).
//   - Eviction: a request may name ranks whose letters its sender refused (evict); the coordinator
//     neither waits for them nor admits them, and answers their own requests with kEvicted. Asking
//     survivors skip an evicted rank as coordinator. (Not Byzantine-tolerant: a rank that lies
//     about a letter can have an honest peer evicted.)
//   - A late request gets the decision when its sender is a member, else FailedPrecondition naming
//     it as left out. Requests for another job or epoch are FailedPrecondition; a rank out of range
//     is InvalidArgument.
// A member whose next_round is round + 1 completed a round the others did not: it rolls back.
// Thread-safe. Handle blocks the calling (gRPC handler) thread for at most window + kProbeTimeout.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/net/tls.h"
#include "sketchps/v1/peer.grpc.pb.h"

namespace sketchps::peer {

inline constexpr absl::Duration kProbeTimeout = absl::Seconds(2);  // > the channels' 1 s reconnect backoff

struct RegroupConfig {
  std::string job_id;
  std::uint64_t epoch = 0;                    // the membership epoch this worker is in
  std::uint32_t rank = 0;                     // its rank in that epoch
  std::vector<std::string> peers;             // every rank's Peer address in that epoch
  absl::Duration window = absl::Seconds(30);  // how long a coordinator waits for silent ranks
  TlsConfig tls;                              // as the epoch's PeerConfig
  std::vector<std::uint32_t> identities;      // as PeerConfig::identities
};

struct RegroupPlan {
  std::uint64_t epoch = 0;
  std::vector<std::uint32_t> members;  // ranks of the failed epoch, ascending
  std::uint64_t round = 0;
  // This worker's rank in the new epoch, or nullopt when it is not a member.
  std::optional<std::uint32_t> RankOf(std::uint32_t old_rank) const;
};

// The decision rules, without the network (pure; Regrouper uses them):
// DecideRegroup: the plan for `asked` (rank -> next_round) of the failed epoch's num_ranks ranks, or
// FailedPrecondition (no strict majority, next rounds more than one apart).
// `evicted`: ranks a survivor refused a letter of: never members, and not waited for.
absl::StatusOr<RegroupPlan> DecideRegroup(std::uint64_t failed_epoch, std::size_t num_ranks,
                                          const std::map<std::uint32_t, std::uint64_t>& asked,
                                          const std::set<std::uint32_t>& evicted = {});
// PlanFromResponse: a survivor's check of the coordinator's answer to `request` (an epoch of
// num_ranks ranks): epoch + 1, members ascending, in range, a strict majority that includes the
// asker, round = the asker's next_round or the one before. InvalidArgument naming the field.
absl::StatusOr<RegroupPlan> PlanFromResponse(const v1::RegroupResponse& response, const v1::RegroupRequest& request,
                                             std::size_t num_ranks);

class Regrouper {
 public:
  Regrouper() = default;
  Regrouper(const Regrouper&) = delete;
  Regrouper& operator=(const Regrouper&) = delete;

  // Enters `config.epoch`: earlier collections are forgotten. InvalidArgument for a bad config.
  absl::Status Arm(RegroupConfig config);
  // Coordinator side of one request. Blocks until the decision.
  // `caller`: the identity the request came with (common/net/tls.h); a rank other than its own is
  // PermissionDenied.
  absl::StatusOr<RegroupPlan> Handle(const v1::RegroupRequest& request,
                                     const std::optional<Identity>& caller = std::nullopt);
  // Survivor side: the decision for this worker's failed epoch (see the protocol above). `evict`:
  // ranks whose letters this worker refused (kMisbehaved): the coordinator leaves them out.
  absl::StatusOr<RegroupPlan> Ask(std::uint64_t next_round, const std::set<std::uint32_t>& evict = {});
  // The armed epoch (0 before Arm).
  std::uint64_t epoch() const;

 private:
  struct Collection {
    std::map<std::uint32_t, std::uint64_t> asked;  // rank -> next_round
    std::set<std::uint32_t> dead;
    std::set<std::uint32_t> evicted;  // named by any request
    bool started = false;
    std::optional<absl::StatusOr<RegroupPlan>> decision;
  };

  absl::Status Check(const v1::RegroupRequest& request) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Collect(std::uint64_t epoch);
  static absl::StatusOr<RegroupPlan> AnswerFor(const Collection& c, std::uint64_t epoch, std::uint32_t rank);
  bool Probe(std::uint32_t rank);

  mutable absl::Mutex mu_;
  RegroupConfig config_ ABSL_GUARDED_BY(mu_);
  bool armed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::shared_ptr<v1::Peer::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
  // By failed epoch; kept after re-arming, so that late requests still get their epoch's decision.
  std::map<std::uint64_t, Collection> collections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sketchps::peer
