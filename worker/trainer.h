// The worker's training loop, in both modes (job.mode): "ps" through the parameter servers
// (worker/ps_transport.h), "decentralized" through the peers (worker/peer_transport.h).
//
//   Train(options) joins every shard (ps; decentralized: starts its Peer service), then for each
//   round r from the shards' rounds_applied (decentralized: 0) to job.total_rounds():
//     batch   = this rank's samples of step r by the data order rule (fashion_mnist.h)
//     compute = forward + backward into the flat gradient buffer
//     round   = Replica::RunRound over the PsClient (every shard in parallel), which also applies
//               G_t to this worker's weights
//     check   = the weights of each shard's range must hash to the checksum the shard reported for
//               its master copy after this round (else FailedPrecondition "replica diverged")
//   Decentralized mode, peer.on_failure: regroup: a round that fails because a peer is lost makes
//   the survivors agree on a new membership (Transport::Regroup, peer/regroup.h). Each survivor then
//   rolls back to its state at the start of the agreed round (weights and momentum; it keeps the
//   last two), rebuilds its Replica for its new rank and P' workers (local scheme state such as
//   error-feedback residuals starts empty, identically on every survivor), scales the learning rate
//   by P'/P (the global batch shrank) and goes on with the data plan of worker/round_plan.h.
//   Rank 0 evaluates the test set every train.eval_every_rounds rounds and after the last round
//   (after a regroup, the new rank 0), on a copy of the weights in a thread of its own
//   (BackgroundEvaluation), so that the others' rounds never wait for it. The result goes into the
//   first record written after it finished, with test_round naming the evaluated round. An
//   evaluation point that finds the previous evaluation still running is skipped (logged); the
//   last round waits for its own evaluation.
//   Every round appends one JSON line to options.metrics_out (when set):
//     round, time (unix seconds at the end of the exchange), epoch, loss, bytes_up, bytes_down (raw payload bytes), wire_up, wire_down (serialized
//     gRPC messages), dense_bytes (4 * d, what dense SGD sends each way), selected, skipped,
//     compute_s, compress_s, communicate_s, workers (P of this round), [test_accuracy, test_loss, test_round],
//     checksum (hex), and on the first round after a regroup "regroup": {epoch, workers, lost,
//     rounds_redone (rounds this worker had completed and rolled back), seconds (failure to restart)}.
//   communicate_s is the longest per-shard time inside RPCs (the shards run in parallel);
//   compress_s is the rest of the round (compression, decompression, optimizer step).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "job/job_spec.h"

namespace sketchps::worker {

struct TrainerOptions {
  JobSpec job;
  std::uint32_t rank = 0;
  std::vector<std::string> servers;               // ps: by shard id; size must equal job.servers
  std::string listen;                             // decentralized: this worker's Peer service
  std::vector<std::string> peers;                 // decentralized: every rank's address, by rank
  std::string metrics_out;                        // JSON lines, one per round ("" = none)
  absl::Duration patience = absl::Seconds(120);   // how long a shard may stay unreachable
  absl::Duration rpc_timeout = absl::Seconds(20);
  absl::Duration peer_timeout = absl::Seconds(60);  // decentralized: a silent peer fails the round
  bool regroup = true;                              // decentralized: go on with the survivors
  int log_every_rounds = 50;
};

struct TrainSummary {
  std::uint64_t first_round = 0;   // where this worker started (resume)
  std::uint64_t rounds = 0;        // rounds this worker ran (rolled-back ones included)
  std::optional<double> final_test_accuracy;  // rank 0 only
  std::uint64_t weights_checksum = 0;         // WeightsChecksum of all weights at the end
  std::vector<float> final_weights;
  std::uint32_t final_workers = 0;  // workers in the last round (fewer after a regroup)
};

// Errors: InvalidArgument for configuration problems (exit code 2 in the daemon), FailedPrecondition
// "replica diverged" (exit 3), anything else is a runtime failure (exit 1).
absl::StatusOr<TrainSummary> Train(const TrainerOptions& options);

// Whether an error from Train means the replica diverged from the servers' master copy.
bool IsReplicaDivergence(const absl::Status& status);

}  // namespace sketchps::worker
