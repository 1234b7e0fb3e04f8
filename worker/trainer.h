// The worker's training loop, in both modes (job.mode): ps through the parameter servers
// (ps/transport.h), decentralized through the peers (peer/transport.h).
//
//   Train(options) joins every shard (ps; decentralized: starts its Peer service), then for each
//   round r from the shards' rounds_applied (decentralized: 0) to the plan's last round:
//     batch    = this rank's samples of step r by the data order rule (fashion_mnist.h)
//     compute  = forward + backward into the flat gradient buffer; with options.overlap each shard's
//                round starts on a thread of its own as soon as its layers' gradients exist
//                (worker/gradient_watch.h), so shards of the later layers communicate while
//                backward goes on with the earlier ones
//     round    = per shard: the scheme's phases through the transport's aggregator, then G_t applied
//                to the shard's range of this worker's weights (Replica::RunShard)
//     check    = the weights of each shard's range must hash to the checksum the shard reported for
//                its master copy after this round (else FailedPrecondition "replica diverged")
//     evaluate = every train.eval_every_rounds rounds and after the last one, every rank evaluates
//                its 1/P share of the test set (train.eval_samples images; after the last round all
//                of them) and the counts are summed over the workers (SumOverWorkers), so every
//                rank records the exact accuracy, under the round it evaluated
//   Decentralized mode, peer.on_failure: regroup: a round that fails because a peer is lost makes
//   the survivors agree on a new membership (Transport::Regroup, peer/regroup.h). Each survivor then
//   rolls back to its state at the start of the agreed round (weights and momentum; it keeps the
//   last two), rebuilds its Replica for its new rank and P' workers (local scheme state such as
//   error-feedback residuals starts empty, identically on every survivor), scales the learning rate
//   by P'/P (the global batch shrank) and goes on with the data plan of session/round_plan.h.
//   Every round appends one JSON line to options.metrics_out (when set):
//     round, round_start and time (unix seconds when the round's compute began and when its exchange
//     ended), epoch, loss, bytes_up, bytes_down (the serialized messages: the one "bytes" figure of
//     every report), payload_up, payload_down (the payload arrays inside them), dense_bytes (4 * d, what dense SGD
//     sends each way), selected, skipped, workers (P of this round), compute_s (forward + backward), exchange_s (from
//     the end of compute to the end of the last shard's round: what overlap did not hide), communicate_s (the longest
//     time one shard spent inside the transport's calls), compress_s (the longest time one shard spent outside them:
//     compression, decompression, optimizer step), checksum (hex); in compressed rounds input_norm, residual_norm,
//     sent_share and, with scheme.diagnostics, recovered_share, best_share, hit_rate, candidate_hit_rate
//     (session/session.cc, engine/scheme.h RoundDiagnostics); in a round where the recovery floor was found
//     not held (schemes/recovery_floor.h) floor_not_held (on how many shards) and floor_growth; after an evaluation
//     test_accuracy, test_loss, test_round (the round whose weights were evaluated), test_samples, eval_s, and final:
//     true after the last round; on the first round after a regroup "regroup": {epoch, workers, lost, rounds_redone,
//     seconds}.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/net/tls.h"
#include "job/job_spec.h"
#include "session/session.h"
#include "worker/skipped_rounds.h"

namespace sketchps::worker {

class WorkerMetrics;  // worker/worker_metrics.h

// The session's options (session/session.h: job, rank, addresses, timeouts, TLS) plus the training
// loop's own.
struct TrainerOptions : session::SessionOptions {
  std::string metrics_out;  // JSON lines, one per round ("" = none)
  int log_every_rounds = 50;
  bool overlap = true;                  // start a shard's round as soon as its gradients exist
  std::set<std::uint64_t> dump_rounds;  // write this worker's gradient of these rounds ...
  std::string dump_dir;                 // ... into this folder (common/wire/gradient_dump.h)
  WorkerMetrics* metrics = nullptr;     // not owned; sees every round's record (may be null)
};

struct TrainSummary {
  std::uint64_t first_round = 0;              // where this worker started (resume)
  std::uint64_t rounds = 0;                   // rounds this worker ran (rolled-back ones included)
  std::optional<double> final_test_accuracy;  // of the evaluation after the last round
  std::uint64_t weights_checksum = 0;         // WeightsChecksum of all weights at the end
  std::vector<float> final_weights;
  std::uint32_t final_workers = 0;  // workers in the last round (fewer after a regroup)
  // The rounds this worker sat out for a non-finite gradient (worker/skipped_rounds.h), also logged
  // and marked "skipped" in their records. A training error names them too.
  SkippedRounds skipped;
};

// Errors: configuration problems (IsConfigurationError, common/reason.h: exit code 2 in the daemon),
// a replica that diverged from the servers' master copy (IsReplicaDivergence: exit 3), anything else
// is a runtime failure (exit 1).
absl::StatusOr<TrainSummary> Train(const TrainerOptions& options);

}  // namespace sketchps::worker
