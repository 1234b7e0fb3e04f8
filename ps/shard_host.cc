// ShardHost's life (ps/shard_host.h): construction (the checkpoint writer, the round deadline's ticker),
// Open (the newest valid checkpoint, kept until assembly), the destructor (the ticker stops, the strand
// drains), and what every part reads: the shard once it serves, the time since the last call. The
// other concerns have files of their own:
//   ps/shard_host_assembly.cc    Join and assembly: the offers, the state DecideState picks, serving
//   ps/shard_host_rounds.cc      PushPull: validation, admission, answers, the recent results, GetWeights
//   ps/shard_host_membership.cc  Leave and job_done (ps/shard_host_elastic.cc: elastic membership)
//   ps/shard_host_checkpoint.cc  a checkpoint read back (Restore) and written (SubmitCheckpoint)
//   ps/shard_host_waiting.cc     the round deadline's ticker and whom a phase waits for
//   ps/shard_host_stop.cc        shutdown: refusing new phases, releasing waiting calls, the last checkpoint
#include "ps/shard_host.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/wire/codec.h"
#include "engine/phase_proto.h"
#include "ps/checkpoint.h"
#include "ps/shard_host_fields.h"
#include "spdlog/spdlog.h"

namespace sketchps::ps {

using host_fields::Invalid;
using host_fields::Precondition;

namespace host_fields {

// Decodes a final result carried in a Join or a checkpoint (header: round and phase).
absl::StatusOr<FinalResult> DecodeFinal(const v1::Payload& payload, std::uint32_t contributors, std::uint64_t range_len,
                                        absl::string_view field) {
  SKETCHPS_ASSIGN_OR_RETURN(auto body, DecodeBody(payload, range_len));
  if (!body) return Invalid(field, "has no body");
  const auto& h = payload.header();
  if (h.phase() >= kMaxPhases)
    return Invalid(absl::StrCat(field, ".header.phase"), absl::StrCat(h.phase(), " >= ", kMaxPhases));
  return FinalResult{PhaseKey{h.round(), h.phase()},
                     std::make_shared<const PhaseResult>(PhaseResult{std::move(*body), contributors})};
}

}  // namespace host_fields

ShardHost::ShardHost(HostOptions options, ServerMetrics* metrics) : options_(std::move(options)), metrics_(metrics) {
  if (options_.job.round_deadline > absl::ZeroDuration()) ticker_ = std::thread([this] { TickDeadlines(); });
  if (options_.checkpoint_dir.empty()) return;
  writer_ = std::make_unique<CheckpointWriter>(
      options_.checkpoint_dir,
      [this](const v1::ShardCheckpoint& c, const absl::Status& st, double seconds) {
        if (metrics_) metrics_->CountCheckpoint(st.ok(), seconds);
        if (!st.ok()) {
          spdlog::error(
              "shard {}: checkpoint of round {} failed (training continues; a restart recovers from the "
              "workers' replicas): {}",
              options_.shard_id, c.rounds_applied(), std::string(st.message()));
        }
      },
      options_.checkpoint_key);
}

void ShardHost::MarkCall() { last_call_ns_.store(absl::ToUnixNanos(absl::Now())); }

absl::Duration ShardHost::idle() const {
  if (in_flight_.load() > 0) return absl::ZeroDuration();
  return absl::Now() - absl::FromUnixNanos(last_call_ns_.load());
}

ShardHost::~ShardHost() {
  stop_ticker_.Notify();
  if (ticker_.joinable()) ticker_.join();
  std::shared_ptr<Shard> shard = this->shard();
  if (shard) shard->Drain();  // no strand task may run once the host is gone
}

absl::StatusOr<std::unique_ptr<ShardHost>> ShardHost::Open(HostOptions options, ServerMetrics* metrics) {
  if (options.shard_id >= options.job.servers) {
    return Invalid("--shard",
                   absl::StrCat(options.shard_id, " is not a shard of this job (servers: ", options.job.servers, ")"));
  }
  if (options.checkpoint_every == 0) return Invalid("checkpoint.every_rounds", "must be >= 1");
  std::unique_ptr<ShardHost> host(new ShardHost(std::move(options), metrics));
  if (host->options_.checkpoint_dir.empty()) return host;
  auto loaded = LoadLatest(host->options_.checkpoint_dir, host->options_.job.job_id, host->options_.shard_id,
                           host->options_.checkpoint_key.get(), host->options_.older_if_damaged);
  if (loaded.status().code() == absl::StatusCode::kNotFound) return host;
  SKETCHPS_RETURN_IF_ERROR(loaded.status());
  for (const auto& skipped : loaded->skipped) spdlog::warn("skipped a checkpoint: {}", skipped);
  auto restored = host->Restore(loaded->checkpoint);
  if (!restored.ok()) return Annotate(restored.status(), loaded->path);
  host->restored_ = *std::move(restored);
  {
    absl::MutexLock lock(&host->mu_);
    host->loaded_ = loaded->checkpoint;
  }
  if (!host->restored_->workers_left.empty()) {
    absl::MutexLock lock(&host->left_mu_);
    host->left_ = host->restored_->workers_left;
    spdlog::info("shard {}: {} of {} workers had finished the job before the restart (worker(s) {})",
                 host->options_.shard_id, host->left_.size(), host->options_.job.workers,
                 absl::StrJoin(host->left_, ", "));
  }
  host->origin_ = absl::StrCat("checkpoint of round ", loaded->checkpoint.rounds_applied(), " in ", loaded->path);
  return host;
}

std::shared_ptr<Shard> ShardHost::shard() const {
  absl::MutexLock lock(&mu_);
  return shard_;
}

std::uint64_t ShardHost::rounds_applied() const {
  auto s = shard();
  return s ? s->rounds_applied() : 0;
}

}  // namespace sketchps::ps
