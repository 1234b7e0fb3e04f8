// ShardHost: everything one parameter-server shard does, independent of gRPC (ps/service.h maps
// it onto the ParameterServer RPCs one to one, so tests can drive it either way).
//
// Lifecycle:
//   - Open() loads the newest valid checkpoint of (job, shard), if any. The shard then ASSEMBLES:
//     it answers no Join until every worker has joined, each offering its replica of the range
//     (fresh workers: their initial weights), and then serves the state DecideState()
//     (ps/assembly.h) picks among the offers and the checkpoint. So a shard restarted behind the
//     workers, from an older checkpoint or from none, catches up from the workers' replicas.
//     Joins answered meanwhile wait (their callback runs once assembly completes); a newer Join of a
//     worker supersedes its older one (ABORTED).
//   - A SERVING shard answers a Join at once with its current state (a restarted worker resumes).
//   - PushPull validates every field before touching state, submits the contribution to the
//     shard's phase table (where admission checks it against the phase) and answers through its
//     callback once the phase result is published. Errors (absl codes, mapped 1:1 to gRPC codes)
//     name the field, e.g. "payload.header.round: ...":
//       INVALID_ARGUMENT     malformed or inadmissible payloads, worker_id or shard_id out of range,
//                            bad spec, layer tables or weights that do not match;
//       FAILED_PRECONDITION  another job or epoch, a stale round, a round already applied or ahead
//                            of the shard, and (IsRejoin) a shard that is still assembling: the
//                            worker joins again with its replica and retries; (IsReplayRound) a phase
//                            whose predecessor the shard lost in a restart;
//       UNAVAILABLE          the shard is shutting down.
//   - Reductions, master-copy updates and publication run on the shard's strand (engine/shard.h).
//     Every `checkpoint_every` rounds the strand takes a snapshot of the master copy before the
//     round's result is published and hands it to the CheckpointWriter, which writes it on its own
//     thread; what is not yet on disk when the process dies, assembly recovers from the workers.
//   - Round deadline (job.round_deadline > 0): a ticker thread closes every phase that has waited that
//     long since its first push without the workers still missing (engine/phase_table.h); their
//     pushes of that round are then answered with the result and `excluded` set, and each is logged
//     ("round R phase P closed at its deadline ... without worker W"; first ten, then every 100th).
//   - Elastic membership (job.elastic; ps/shard_host_elastic.cc): assembly waits for the members of
//     the round it restores (fresh: the initial slots). A Join with elastic_join registers the worker
//     as a member from the first round it can take part in (engine/phase_table.h Join) and is answered
//     once the shard has applied every round before that one, with the state then. A Leave before the
//     end ends the worker's membership; the job is done once no member is left. The roster is
//     checkpointed. Each change is logged ("worker W joins at round R", "worker W left before round R").
//   - Leave(): a worker has finished the job; once all have, job_done() (the daemon exits 0). A
//     Leave with `failed` set is a worker's report that it stops on an error: logged as a failure,
//     not counted as having left.
//   - BeginShutdown(): new phases are refused (UNAVAILABLE), phases that already have contributions
//     still complete; ReleaseInFlight() answers the calls still waiting after the grace; then
//     CheckpointNow() saves the current state.
// Thread-safe. Callbacks run on gRPC's or the strand's threads and must not block.
// The implementation is one file per concern (assembly, rounds, membership, checkpoints, deadlines
// and waiting, stop); ps/shard_host.cc lists them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/layout.h"
#include "common/net/tls.h"
#include "common/wire/fingerprint.h"
#include "engine/optimizer.h"
#include "engine/shard.h"
#include "ps/assembly.h"
#include "ps/checkpoint_writer.h"
#include "ps/metrics.h"
#include "sketchps/v1/checkpoint.pb.h"
#include "sketchps/v1/parameter_server.pb.h"

namespace sketchps::ps {

// What a shard needs of the job (server/main.cc fills it from the job spec).
struct ShardJob {
  std::string job_id;
  std::uint32_t workers = 1;
  std::uint32_t servers = 1;
  OptimizerConfig optimizer;
  bool global_momentum = true;
  double rounds_per_epoch = 1.0;
  LayerTable layout;        // the model's (empty: taken from the workers' offers, tests)
  Fingerprint fingerprint;  // the job's; a Join whose fingerprint differs is refused
  // The scheme keeps state with the reduction (Scheme::reduction_state: FetchSGD): it is checkpointed
  // with the shard, and a restart may only resume from the shard's own checkpoint (ps/assembly.h).
  bool reduction_state = false;
  // ps.round_deadline_seconds (job/job_spec.h PsSpec): zero, every round waits for every worker.
  absl::Duration round_deadline = absl::ZeroDuration();
  // ps.elastic with ps.initial_workers (unset: every worker is a member of every round).
  std::optional<ElasticRoster> elastic;
};

struct HostOptions {
  ShardJob job;
  std::uint32_t shard_id = 0;
  std::string checkpoint_dir;            // empty: no checkpoints
  std::uint64_t checkpoint_every = 100;  // rounds between checkpoints
  // The checkpoint key (--checkpoint-key-file): checkpoints are written with an integrity tag and
  // only tagged ones whose tag matches are restored (ps/checkpoint.h). Null: untagged checkpoints.
  std::shared_ptr<const FileKey> checkpoint_key;
  // checkpoint.on_damaged: older: a damaged newest checkpoint is skipped for an older one (logged);
  // false: it stops Open, naming the file (ps/checkpoint.h LoadLatest).
  bool older_if_damaged = false;
};

// A checkpoint's roster (ShardCheckpoint.roster): empty, or one span per worker with from <= until
// (InvalidArgument naming checkpoint.roster otherwise).
absl::StatusOr<std::vector<MemberSpan>> RosterFromProto(const v1::ShardCheckpoint& checkpoint, std::uint32_t workers);

class ShardHost {
 public:
  // Errors: shard_id >= job.servers, an unreadable checkpoint directory, a checkpoint that does
  // not fit the job, a damaged newest checkpoint (without older_if_damaged), or one refused for its
  // integrity tag (tampered, or the key is missing or wrong; the message names the file).
  static absl::StatusOr<std::unique_ptr<ShardHost>> Open(HostOptions options, ServerMetrics* metrics);
  ~ShardHost();

  // Each reply runs exactly once (possibly before the call returns).
  using JoinReply = std::function<void(absl::StatusOr<v1::JoinResponse>)>;
  using PushReply = std::function<void(absl::StatusOr<v1::PushPullResponse>)>;
  // `caller` is the identity the request came with (common/net/tls.h; nullopt without TLS): a worker
  // may only join and push as itself, and only workers may read the weights (PERMISSION_DENIED).
  void Join(const v1::JoinRequest& request, const std::optional<Identity>& caller, JoinReply reply);
  void PushPull(const v1::PushPullRequest& request, const std::optional<Identity>& caller, PushReply reply);
  absl::StatusOr<v1::GetWeightsResponse> GetWeights(const v1::GetWeightsRequest& request,
                                                    const std::optional<Identity>& caller);

  // Records that a worker has finished (idempotent); `caller` as for Join. Once every worker has
  // left, job_done() turns true (the daemon then shuts down as on SIGTERM and exits 0). A new
  // departure is written to a checkpoint (ShardCheckpoint.workers_left), so a restarted shard still
  // knows it; a restarted shard that is not serving yet accepts the Leave of a worker at its
  // checkpoint's round. With request.failed(): logs "worker N failed at round R: <reason>" (any
  // round) and records nothing.
  absl::StatusOr<v1::LeaveResponse> Leave(const v1::LeaveRequest& request, const std::optional<Identity>& caller);
  bool job_done() const;

  // Why a waiting Join has not been answered yet ("waiting for workers 2, 3 to join: 2 of 4 ...").
  std::string AssemblyStatus() const;
  // Whom phase (round, phase) still waits for: "round 12 phase 0 on shard 0 is waiting for worker 1
  // (worker 0, 2, 3 pushed)" (ps/shard_host_waiting.cc). Also logged, once per phase and then at most
  // every 10 s. The gRPC service answers a PushPull with it at its deadline.
  std::string WaitingFor(std::uint64_t round, std::uint32_t phase);

  void BeginShutdown();
  // After BeginShutdown and the drain's grace: answers every Join and PushPull still waiting (for
  // the other workers, who may be gone) with UNAVAILABLE (Reason::kShuttingDown; the worker retries
  // after a restart), and every later one at once, so that the gRPC server can shut down at once
  // and cancels no call (ps/shard_host_stop.cc).
  void ReleaseInFlight();
  // PushPull calls currently inside the host (waiting for their phase included).
  int in_flight() const { return in_flight_.load(); }
  // Time since the last call of any kind began (zero while a PushPull is inside); from Open on.
  absl::Duration idle() const;
  // Waits for the strand and the writer, then writes a checkpoint of the current state (no-op
  // without a directory or a shard).
  absl::Status CheckpointNow();

  // Rounds applied so far (0 while assembling a fresh job).
  std::uint64_t rounds_applied() const;
  const HostOptions& options() const { return options_; }
  // "restored round N from <file>" / "no checkpoint" (for the log).
  const std::string& origin() const { return origin_; }

 private:
  // The optimizer state's length over n entries of this shard (engine/optimizer.h).
  std::uint64_t StateSize(std::uint64_t n) const {
    return OptimizerStateSize(options_.job.optimizer, n, options_.job.global_momentum);
  }
  struct PendingJoin {
    Offer offer;
    JoinReply reply;
  };
  // What answering a PushPull needs once its phase completes (the request itself may be gone).
  struct Asked {
    PhaseKey key;
    v1::PayloadHeader header;
    bool final_phase = false;
    std::uint64_t request_bytes = 0;
    absl::Time arrived;
    bool first = false;  // the phase's first arrival (its wait is the straggler wait)
  };
  ShardHost(HostOptions options, ServerMetrics* metrics);

  absl::StatusOr<ShardState> Restore(const v1::ShardCheckpoint& checkpoint);
  absl::StatusOr<Offer> DecodeOffer(const v1::JoinRequest& request) const;
  // Builds the shard from `state` (under mu_); the JoinResponse every waiting worker receives.
  absl::Status Serve(ShardState state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::JoinResponse StateResponse(const Shard& shard) const;
  std::shared_ptr<Shard> shard() const;
  void OnApplied(const AppliedRound& round);
  // A push without a body to the final phase of a round older than the phase table's window, whose
  // final result the history still holds (a worker left out of it catching up); else nullopt.
  std::optional<FinalResult> FinalFromHistory(const v1::PushPullRequest& request, const Shard& shard);
  // The round deadline's ticker thread (job.round_deadline > 0): closes expired phases, logs them.
  void TickDeadlines();
  // Writes `shard`'s state (a snapshot, the workers that left, the roster) to a checkpoint.
  void SubmitCheckpoint(const Shard& shard);
  void SetWorkersLeft(v1::ShardCheckpoint& checkpoint) const;  // c.workers_left = left_
  // Elastic membership (ps/shard_host_elastic.cc).
  void ElasticJoin(const Offer& offer, std::uint64_t member_from, JoinReply reply);
  // Answers the elastic Joins whose first round is `rounds_applied` (from OnApplied).
  void AnswerElasticJoins(std::uint64_t rounds_applied);
  absl::Status ElasticLeave(Shard& shard, const v1::LeaveRequest& request);
  // The workers assembly waits for: every worker, or in an elastic job the members of the restored
  // round (fresh: the initial slots).
  std::vector<std::uint32_t> AssemblyMembers() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AssemblyComplete() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void SetRoster(const PhaseTable& table, v1::ShardCheckpoint& checkpoint);
  absl::Status CheckHeader(const v1::PayloadHeader& h) const;
  absl::StatusOr<PhaseKey> Admit(const v1::PushPullRequest& request, Shard& shard, bool& first_arrival);
  void Answer(const Asked& asked, Shard& shard, absl::StatusOr<std::shared_ptr<const PhaseResult>> outcome,
              PushReply reply);
  std::string AssemblyStatusLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // UNAVAILABLE with Reason::kShuttingDown: the shard is stopping, retry after it restarts.
  static absl::Status Stopping();
  // The encoded body of `key`'s result (encoded once, shared by every response).
  absl::StatusOr<std::shared_ptr<const v1::Payload>> EncodedResult(const PhaseKey& key, const PhaseResult& result);
  bool FirstArrival(const PhaseKey& key, absl::Time now);
  void MarkCall();

  // Constant after construction.
  const HostOptions options_;
  ServerMetrics* const metrics_;
  std::string origin_ = "no checkpoint";
  std::optional<ShardState> restored_;                              // the checkpoint's state, until assembly
  std::optional<v1::ShardCheckpoint> loaded_ ABSL_GUARDED_BY(mu_);  // the checkpoint it came from
  std::atomic<bool> closing_{false};
  std::atomic<bool> released_{false};  // ReleaseInFlight ran: every call is answered at once
  std::atomic<int> in_flight_{0};
  std::atomic<std::uint64_t> next_call_id_{0};
  absl::Mutex calls_mu_;
  std::map<std::uint64_t, PushReply> waiting_calls_ ABSL_GUARDED_BY(calls_mu_);  // PushPulls not yet answered
  std::atomic<std::int64_t> last_call_ns_{absl::ToUnixNanos(absl::Now())};

  mutable absl::Mutex mu_;
  std::shared_ptr<Shard> shard_ ABSL_GUARDED_BY(mu_);
  LayerTable layers_ ABSL_GUARDED_BY(mu_);
  std::map<std::uint32_t, PendingJoin> joining_ ABSL_GUARDED_BY(mu_);  // by worker, while assembling
  // Workers that have finished the job; its own lock, taken last (after mu_), so that checkpoints
  // taken on the strand can read it.
  mutable absl::Mutex left_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::set<std::uint32_t> left_ ABSL_GUARDED_BY(left_mu_);

  // Lock order: mu_ before results_mu_ and arrivals_mu_.
  absl::Mutex results_mu_;
  std::map<PhaseKey, std::shared_ptr<const v1::Payload>> encoded_ ABSL_GUARDED_BY(results_mu_);  // recent phases
  // Recent rounds, by round: their final results stay fetchable by left-out workers for up to
  // kHistoryRounds rounds and kHistoryBytes of results (and always the phase table's window).
  std::map<std::uint64_t, AppliedRound> applied_ ABSL_GUARDED_BY(results_mu_);
  std::uint64_t applied_bytes_ ABSL_GUARDED_BY(results_mu_) = 0;
  static constexpr std::size_t kHistoryRounds = 64;
  static constexpr std::uint64_t kHistoryBytes = 64 << 20;

  absl::Mutex arrivals_mu_;
  std::map<PhaseKey, absl::Time> first_arrival_ ABSL_GUARDED_BY(arrivals_mu_);  // recent phases only

  v1::ShardCheckpoint template_;              // job, shard, range and layers; set by Serve before any checkpoint
  std::unique_ptr<CheckpointWriter> writer_;  // null without a checkpoint directory

  // Elastic Joins waiting for the round before their first one to be applied, by worker.
  struct WaitingJoin {
    std::uint64_t from = 0;
    JoinReply reply;
  };
  absl::Mutex joins_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::map<std::uint32_t, WaitingJoin> elastic_waiting_ ABSL_GUARDED_BY(joins_mu_);

  absl::Mutex waiting_log_mu_;
  // The phase WaitingFor logged last, and when.
  std::pair<PhaseKey, absl::Time> waiting_logged_ ABSL_GUARDED_BY(waiting_log_mu_) = {PhaseKey{~0ull, 0},
                                                                                      absl::InfinitePast()};

  absl::Notification stop_ticker_;
  std::thread ticker_;  // joinable only with a round deadline; stopped first by the destructor
};

}  // namespace sketchps::ps
