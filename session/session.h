// Session: one worker's part in a job, without the model: the transport of the job's mode, the
// Replica (a scheme and a replicated optimizer per shard), the data plan and the per-round record.
// The C++ training loop (trainer.h) and the Python package (python/, docs/pytorch.md) both run their
// rounds through it, so both compute the same bits for the same gradients.
//
// PUBLIC SURFACE (docs/design-notes.md "Public surfaces"): what a training loop in another language
// or framework builds against (the Python package does); the record's fields are the metrics format
// of trainer.h and change only by adding fields.
//
//   auto session = Session::Create(options, layers, params);   // layers must equal job.layout
//   round = session->Join(params);                       // may overwrite params (the servers' copy)
//                                                        // (Join(params, &local_steps) with local steps)
//   loop: record = session->Step(round, loss, grads, params);   // every shard, then the checks
//   or, overlapping the exchange with backward:
//         auto flight = session->StartRound(round, grads, params);   // a thread per shard, waiting
//         ... backward, calling flight->Ready(s) as each shard's gradients complete ...
//         record = session->Complete(round, loss, session->Land(*flight, start), params);
//   decentralized, peer.on_failure regroup: RememberRoundStart(round, params) before each round;
//   after a failed round, Recover(failure, round, params) agrees on the survivors, rolls params
//   and the optimizer state back to the agreed round's start and returns where to go on.
//
// Contract:
// - params and grads are the whole flat vector (layers.dim() floats), owned by the caller, and must
//   stay valid while a call runs. Step writes G_t into params (every shard's range).
// - The record is the JSON line of trainer.h (round, epoch, loss, bytes, phase times, checksum, ...).
// - Rounds run in order from Join's answer to plan().last_round; the caller keeps count.
// - Errors: InvalidArgument for configuration problems (naming the option or key),
//   FailedPrecondition "replica diverged" when the replica differs from the servers' master copy,
//   the transport's errors otherwise.
// - Not thread-safe, except RunShard for different shards at once.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/file_write.h"
#include "common/net/tls.h"
#include "engine/replica.h"
#include "engine/shard_threads.h"
#include "engine/transport.h"
#include "job/job_spec.h"
#include "kernels/backend.h"
#include "session/round_plan.h"
#include "session/scheme_state_file.h"

namespace sketchps::session {

struct SessionOptions {
  JobSpec job;
  std::uint32_t rank = 0;
  std::vector<std::string> servers;              // ps: by shard id; size must equal job.servers
  std::string listen;                            // decentralized: this worker's Peer service
  std::vector<std::string> peers;                // decentralized: every rank's address, by rank
  std::string port_file;                         // decentralized: write the Peer service's port here
  std::string peers_file;                        // decentralized, no `peers`: wait for this list
  absl::Duration patience = absl::Seconds(120);  // how long a shard may stay unreachable
  absl::Duration rpc_timeout = absl::Seconds(20);
  absl::Duration peer_timeout = absl::Seconds(60);  // decentralized: a silent peer fails the round
  TlsConfig tls;                                    // common/net/tls.h; this worker is worker-<rank>
  // ps mode: save the schemes' state here after every round and restore it at Join, so a restarted
  // worker loses nothing (session/scheme_state_file.h). "": not saved (a restart starts it empty).
  // Decentralized mode ignores it (a killed peer does not rejoin; a regroup starts it empty).
  std::string state_dir;
  // Save every this many rounds: 1 (a restart at any round loses nothing) or the job's
  // checkpoint.every_rounds (only a whole-job --resume from a shard checkpoint is exact; the writes
  // cost a copy of the scheme state, weights and optimizer state: 16 bytes per parameter with AdamW).
  std::uint64_t state_every_rounds = 1;
  // A state file that cannot be written (a full disk) is logged when it happens, naming the file.
  // Then with stop_on_state_error the worker's next round fails with that error (`sketchps run`:
  // --resume and restarts must be exact); without it, training goes on and a restart would start
  // with empty scheme state.
  bool stop_on_state_error = false;
  // The checkpoint key (--checkpoint-key-file): state files carry an integrity tag under it, and a
  // file whose tag is missing or wrong stops the worker at Join (null: untagged files).
  std::shared_ptr<const FileKey> checkpoint_key;
  // Elastic membership (job key ps.elastic; docs/reliability.md "Elastic workers"). A worker whose
  // rank is not one of the ps.initial_workers joins the running job at this round (unset: as soon as
  // it can). Only for such a rank.
  std::optional<std::uint64_t> join_at_round;
  // Leaves the job before this round (its last round is leave_at_round - 1); 0: at the job's end.
  // Only in an elastic job.
  std::uint64_t leave_at_round = 0;
};

// One shard's part of a round, as its thread saw it.
struct ShardRun {
  absl::StatusOr<RoundOutcome> outcome = absl::UnknownError("not run");
  double seconds = 0;  // from the shard's start (its gradients complete) to its end
};

// A round's exchange as the shards' threads saw it: when its compute began and ended, the transport's
// counters at its start, and every shard's run.
struct RoundRuns {
  absl::Time start;
  absl::Time computed;
  TransportCounters before;
  std::vector<ShardRun> shards;
};

// A round whose shards start as their gradients complete (Session::StartRound).
struct RoundFlight {
  TransportCounters before;  // the transport's counters when the round started
  std::unique_ptr<ShardThreads<ShardRun>> shards;
  void Ready(std::uint32_t shard) { shards->Ready(shard); }
};

// Appends JSON lines to a file ("" : nowhere), one whole record at a time (common/file_write.h
// AppendOnlyFile: a failed write, a full disk, leaves no partial record; a SIGTERM waits for the
// record being written).
class JsonLinesLog {
 public:
  // `first_round`: this worker's first round; records of that round or later already in the file (a
  // restarted worker replaying the round it was killed in) are dropped, so every round is recorded
  // once. The errors name the file.
  absl::Status Open(const std::string& path, std::uint64_t first_round = ~std::uint64_t{0});
  // The error names the file ("<path>: write failed: No space left on device").
  absl::Status Append(const nlohmann::json& record);
  // Append, with a failure logged instead of returned.
  void Write(const nlohmann::json& record);

 private:
  AppendOnlyFile file_;
};

// OK when a model's layout equals the job's; else InvalidArgument describing the first difference:
// which parameter, its name and shape on both sides.
absl::Status CheckLayout(const LayerTable& model, const LayerTable& job);

// Adds an evaluation summed over the workers (accuracy = correct / samples) to round `round`'s
// record, as trainer.h describes (test_accuracy, test_loss, test_round, test_samples, eval_s, final).
// Internal error when samples <= 0.
absl::Status AddEvaluation(nlohmann::json& record, std::uint64_t round, double correct, double samples, double loss_sum,
                           double seconds, bool final);

// OK when this rank's share of round `round`'s evaluation is finite; else InvalidArgument naming the
// value ("evaluation after round 12: this rank's loss_sum is nan: the model diverged ..."). Checked
// before the sum over the workers, so a diverged model is named as such rather than refused on the
// wire as a non-finite payload.
absl::Status CheckEvaluationShare(std::uint64_t round, double correct, double samples, double loss_sum);

class Session {
 public:
  // `params`: this worker's initial weights (layers.dim() floats). In decentralized mode their
  // checksum joins the job fingerprint the peers compare before the first round, so ranks whose
  // models start differently fail with "job fingerprint: ... differs ... in initial_weights" (in ps
  // mode the servers compare the initial weights themselves).
  static absl::StatusOr<std::unique_ptr<Session>> Create(const SessionOptions& options, const LayerTable& layers,
                                                         const float* params);

  // Agrees on the starting point with the servers (or peers); may overwrite params. Returns the first
  // round to run. Once, before any round. With options.state_dir (ps mode), then restores the state
  // saved after that round; or, when the newest file is one round behind the servers, the state,
  // weights and optimizer state of the round before, and returns that round, which the worker
  // replays (session/scheme_state_file.h). A missing or refused file is logged (naming it) and the
  // worker goes on with empty scheme state, as without a state directory.
  // `local`: the worker's state outside the replica (the inner optimizer of train.inner_state keep,
  // worker/local_steps.h), handed to the state files before they restore, so it is saved with every
  // file and restored with the schemes; it must outlive the session. Without state files (no
  // state_dir, decentralized mode) it is left as it is.
  absl::StatusOr<std::uint64_t> Join(float* params, WorkerLocalState* local = nullptr);

  // A whole round: every shard on a thread of its own, then Complete. `compute`: how long the
  // caller's forward and backward took (the record's compute_s).
  absl::StatusOr<nlohmann::json> Step(std::uint64_t round, float loss, const float* grads, float* params,
                                      absl::Duration compute = absl::ZeroDuration());
  // One shard's part of round `round` (different shards may run at once).
  ShardRun RunShard(std::uint32_t shard, std::uint64_t round, const float* grads, float* params);
  // Round `round` in flight: a thread per shard runs RunShard once flight.Ready(s) is called for it
  // (from any thread, e.g. a gradient hook; engine/shard_threads.h). grads and params must stay
  // valid until Land returns.
  RoundFlight StartRound(std::uint64_t round, const float* grads, float* params);
  // Readies every shard not yet started (abandon: releases them unrun, after a failed backward) and
  // collects the round's runs; `start` is when the round's compute began.
  RoundRuns Land(RoundFlight& flight, absl::Time start, bool abandon = false);
  // After every shard's run of `round`: their totals, the replica check, the state saved
  // (options.state_dir: snapshot here, the record's state_s; written while the next round computes,
  // and waited for before its exchange) and the round's record.
  absl::StatusOr<nlohmann::json> Complete(std::uint64_t round, float loss, RoundRuns runs, const float* params);

  // Round deadline (job key ps.round_deadline_seconds): whether every shard has already closed round
  // `round` (this worker was left out and fell behind). Then CatchUp(round, params) fetches each
  // shard's G_t of it and applies it without computing a gradient (the record has caught_up: true
  // and no loss); the worker's residuals and carried gradient go into its next computed round.
  bool Behind(std::uint64_t round) const;
  absl::StatusOr<nlohmann::json> CatchUp(std::uint64_t round, float* params);

  // Elastic membership: the slots that are members of the last round this worker completed (from the
  // shards' answers; every rank without ps.elastic), and this worker's share of an evaluation over
  // them: its index among them and their number (rank and workers without ps.elastic).
  std::vector<std::uint32_t> Members() const;
  std::pair<std::uint32_t, std::uint32_t> EvalShare() const;

  // The elementwise sum of every worker's values after round `round` (engine/aggregator.h).
  absl::StatusOr<std::vector<float>> SumOverWorkers(std::uint64_t round, std::vector<float> values);
  // Decentralized, peer.on_failure: regroup: keeps params and the optimizer state at the start of
  // `round` (the last two rounds' are kept, what a regroup rolls back to). No-op otherwise.
  void RememberRoundStart(std::uint64_t round, const float* params);
  // After `failure` in `round`: agrees on the survivors (or returns `failure` when this job does not
  // regroup), rebuilds the plan, learning rate and replica for them, and rolls params and the
  // optimizer state back to the start of the round they go on from. The returned note is the
  // first record's "regroup" entry.
  absl::StatusOr<Regrouped> Recover(const absl::Status& failure, std::uint64_t round, float* params,
                                    nlohmann::json* note);
  // After the last round: tells the servers this worker is done (best effort).
  absl::Status Finish(std::uint64_t rounds_applied);
  // Instead of Finish when the caller stops on an error: tells the servers this worker failed
  // (Transport::ReportFailure: best effort, a few seconds at most).
  absl::Status ReportFailure(std::uint64_t rounds_applied, const std::string& reason);

  bool can_regroup() const;
  const JobSpec& job() const { return o_.job; }
  const RoundPlan& plan() const { return plan_; }
  const ShardMap& shards() const { return shards_; }
  Replica& replica() { return *replica_; }
  std::uint32_t num_shards() const { return replica_->num_shards(); }
  std::uint64_t dim() const { return layers_.dim(); }
  TransportCounters counters() const { return transport_->counters(); }

 private:
  explicit Session(SessionOptions options) : o_(std::move(options)) {}
  absl::Status CheckOptions() const;
  absl::Status StartTransport();
  absl::StatusOr<std::unique_ptr<Replica>> MakeReplica() const;
  // Starts writing the state after `rounds_applied` rounds (the writer logs a failure).
  void SaveState(std::uint64_t rounds_applied, const float* params);
  // The outcome of the state write in progress: its error with stop_on_state_error, else OK.
  absl::Status StateSaved();
  // When a round began, when its compute ended (== begin: none) and when it ended.
  struct RoundTimes {
    absl::Time start, computed, end;
  };
  // The fields every round's record has (trainer.h): the round, its times, the bytes between the two
  // counters, the outcome's selection, skips and left-out shards, the plan's workers, the weights'
  // checksum, and in an elastic job the round's members. Complete and CatchUp add their own.
  nlohmann::json Record(std::uint64_t round, RoundTimes times, const TransportCounters& before,
                        const TransportCounters& after, const ReplicaRound& out, const float* params) const;

  // The replica checksum of params[0, dim()) computed where they live (kernels::Checksum).
  std::uint64_t ParamsChecksum(const float* params) const;
  // copied_to_device, copied_to_host: the bytes this process copied between host and device memory
  // since the previous round's record (since the join for the first).
  void AddCopies(nlohmann::json& record);

  // A worker's state at the start of a round: what a regroup rolls back to.
  struct RoundStart {  // in device memory: a round's snapshot never crosses to the host
    std::uint64_t round = ~0ull;
    kernels::DeviceArray<float> params;
    std::vector<kernels::DeviceArray<float>> optimizer_state;  // per shard
  };

  SessionOptions o_;
  mutable kernels::Scratch scratch_;  // temporaries of the checksum and the round starts' copies
  LayerTable layers_;
  std::array<RoundStart, 2> starts_;  // decentralized regroup: the last two round starts
  kernels::CopiedBytes copied_;       // kernels::BytesCopied() at the previous record (AddCopies)
  ShardMap shards_;
  RoundPlan plan_;
  OptimizerConfig optimizer_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Replica> replica_;
  std::unique_ptr<SchemeStateFiles> state_files_;  // options.state_dir in ps mode, else null
};

}  // namespace sketchps::session
