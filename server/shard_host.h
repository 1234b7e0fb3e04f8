// ShardHost: everything one parameter-server shard does, independent of gRPC (the service in
// service.h maps it onto the ParameterServer RPCs one to one, so tests can drive it either way).
//
// Lifecycle:
//   - Open() loads the newest valid checkpoint of (job, shard) from the checkpoint directory, if
//     any, and builds the shard from it (weights, momentum, rounds applied, the last round's final
//     result). Otherwise the shard is created by the first Join, from the layer table and initial
//     weights that worker sends; later Joins must agree.
//   - Join / PushPull / GetWeights validate every field before touching state. Errors (absl codes,
//     mapped 1:1 to gRPC codes) name the field, e.g. "payload.header.round: ...":
//       INVALID_ARGUMENT     malformed payloads, worker_id or shard_id out of range, bad spec, layer
//                            tables or weights that do not match;
//       FAILED_PRECONDITION  another job or epoch, a stale round, a round ahead of the shard, no
//                            worker joined yet, or (IsReplayRound) a phase whose predecessor the shard
//                            lost in a restart;
//       DEADLINE_EXCEEDED    the phase did not complete in time (retry: pushes are idempotent);
//       UNAVAILABLE          the shard is shutting down.
//   - Every applied round is checkpointed (every `checkpoint_every` rounds) before any worker sees
//     its result, so a worker never holds a round the shard could forget in a crash.
//   - BeginShutdown(): new phases are refused (UNAVAILABLE), phases that already have contributions
//     still complete; then CheckpointNow() saves the current state.
// Thread-safe.
#pragma once

#include <atomic>
#include <map>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/layout.h"
#include "job/job_spec.h"
#include "engine/shard.h"
#include "server/metrics.h"
#include "sketchps/v1/checkpoint.pb.h"
#include "sketchps/v1/parameter_server.pb.h"

namespace sketchps::server {

inline constexpr std::uint32_t kMaxPhases = 16;  // phases per round any scheme may use

struct HostOptions {
  JobSpec job;
  std::uint32_t shard_id = 0;
  std::string checkpoint_dir;                     // empty: no checkpoints
  std::uint64_t checkpoint_every = 1;             // rounds between checkpoints (1: exact resume)
  absl::Duration max_wait = absl::Seconds(30);    // longest one PushPull waits for its phase
};

class ShardHost {
 public:
  // Errors: shard_id >= job.servers, an unreadable checkpoint directory, or a checkpoint that does
  // not fit the job (its message names the file).
  static absl::StatusOr<std::unique_ptr<ShardHost>> Open(HostOptions options, ServerMetrics* metrics);

  absl::StatusOr<v1::JoinResponse> Join(const v1::JoinRequest& request);
  // Waits until the phase completes, `deadline` or options.max_wait, whichever comes first.
  absl::StatusOr<v1::PushPullResponse> PushPull(const v1::PushPullRequest& request, absl::Time deadline);
  absl::StatusOr<v1::GetWeightsResponse> GetWeights(const v1::GetWeightsRequest& request);

  void BeginShutdown();
  // PushPull calls currently inside the host.
  int in_flight() const { return in_flight_.load(); }
  // Writes a checkpoint of the current state (no-op without a directory or a shard).
  absl::Status CheckpointNow();

  // Rounds applied so far (0 before the first Join).
  std::uint64_t rounds_applied() const;
  const HostOptions& options() const { return options_; }
  // "restored round N from <file>" / "fresh start" (for the log).
  const std::string& origin() const { return origin_; }

 private:
  ShardHost(HostOptions options, ServerMetrics* metrics) : options_(std::move(options)), metrics_(metrics) {}

  absl::Status Restore(const v1::ShardCheckpoint& checkpoint);
  absl::Status CreateShard(const LayerTable& layers, std::vector<float> weights, const ShardOptions& restored)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ShardOptions BaseShardOptions();
  void OnApplied(const ShardSnapshot& snapshot);
  absl::Status WriteSnapshot(const ShardSnapshot& snapshot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(snapshot_mu_);
  std::shared_ptr<Shard> shard() const;
  absl::StatusOr<v1::PushPullResponse> PushPullLocked(const v1::PushPullRequest& request, absl::Time deadline);
  absl::Status CheckJoinLayout(const v1::JoinRequest& request, LayerTable& layers);
  // Records the first arrival at `key`; true when this call is the first (its wait for the phase is
  // the phase's straggler wait).
  bool FirstArrival(const PhaseKey& key, absl::Time now);

  const HostOptions options_;
  ServerMetrics* const metrics_;
  std::string origin_ = "fresh start";
  std::atomic<bool> closing_{false};
  std::atomic<int> in_flight_{0};

  mutable absl::Mutex mu_;
  std::shared_ptr<Shard> shard_ ABSL_GUARDED_BY(mu_);
  LayerTable layers_ ABSL_GUARDED_BY(mu_);
  ShardRange range_ ABSL_GUARDED_BY(mu_);
  std::optional<std::uint64_t> initial_checksum_ ABSL_GUARDED_BY(mu_);  // of the first Join's weights

  absl::Mutex arrivals_mu_;
  std::map<PhaseKey, absl::Time> first_arrival_ ABSL_GUARDED_BY(arrivals_mu_);  // recent phases only

  // Lock order: mu_ before the shard's locks before snapshot_mu_ (OnApplied runs under the shard's).
  absl::Mutex snapshot_mu_;
  std::optional<ShardSnapshot> last_snapshot_ ABSL_GUARDED_BY(snapshot_mu_);
  v1::ShardCheckpoint template_ ABSL_GUARDED_BY(snapshot_mu_);  // job, shard, range and layers
};

}  // namespace sketchps::server
