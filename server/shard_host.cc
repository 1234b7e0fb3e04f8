#include "server/shard_host.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "common/checksum.h"
#include "common/codec.h"
#include "common/status.h"
#include "engine/phase_table.h"
#include "engine/wire.h"
#include "server/checkpoint.h"

namespace sketchps::server {
namespace {

absl::Status Precondition(absl::string_view field, absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(field, ": ", what));
}
absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardHost>> ShardHost::Open(HostOptions options, ServerMetrics* metrics) {
  if (options.shard_id >= options.job.servers) {
    return Invalid("--shard", absl::StrCat(options.shard_id, " is not a shard of this job (servers: ", options.job.servers, ")"));
  }
  if (options.checkpoint_every == 0) return Invalid("checkpoint.every_rounds", "must be >= 1");
  std::unique_ptr<ShardHost> host(new ShardHost(std::move(options), metrics));
  if (host->options_.checkpoint_dir.empty()) return host;
  auto loaded = LoadLatest(host->options_.checkpoint_dir, host->options_.job.job_id, host->options_.shard_id);
  if (loaded.status().code() == absl::StatusCode::kNotFound) return host;
  SKETCHPS_RETURN_IF_ERROR(loaded.status());
  for (const auto& skipped : loaded->skipped) spdlog::warn("skipped an invalid checkpoint: {}", skipped);
  if (auto st = host->Restore(loaded->checkpoint); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat(loaded->path, ": ", st.message()));
  }
  host->origin_ = absl::StrCat("restored round ", loaded->checkpoint.rounds_applied(), " from ", loaded->path);
  return host;
}

ShardOptions ShardHost::BaseShardOptions() {
  ShardOptions o;
  o.num_workers = options_.job.workers;
  o.optimizer = options_.job.optimizer;
  o.global_momentum = options_.job.scheme.global_momentum;
  o.rounds_per_epoch = options_.job.rounds_per_epoch();
  o.on_applied = [this](const ShardSnapshot& s) { OnApplied(s); };
  return o;
}

absl::Status ShardHost::Restore(const v1::ShardCheckpoint& c) {
  SKETCHPS_ASSIGN_OR_RETURN(LayerTable layers, LayersFromProto(c.layers(), "checkpoint.layers"));
  const std::uint64_t n = c.range_hi() - c.range_lo();
  SKETCHPS_ASSIGN_OR_RETURN(std::vector<float> weights, ParseF32Bytes(c.weights(), n, "checkpoint.weights"));
  ShardOptions restored;
  restored.rounds_applied = c.rounds_applied();
  if (!c.velocity().empty()) {
    SKETCHPS_ASSIGN_OR_RETURN(restored.velocity, ParseF32Bytes(c.velocity(), n, "checkpoint.velocity"));
  }
  if (c.rounds_applied() > 0) {
    if (!c.has_last_result()) return Invalid("checkpoint.last_result", "missing");
    SKETCHPS_ASSIGN_OR_RETURN(auto body, DecodeBody(c.last_result(), n));
    if (!body) return Invalid("checkpoint.last_result", "has no body");
    const auto& h = c.last_result().header();
    if (h.round() + 1 != c.rounds_applied()) {
      return Invalid("checkpoint.last_result.header.round", absl::StrCat(h.round(), " is not the last applied round"));
    }
    restored.last = FinalResult{PhaseKey{h.round(), h.phase()},
                                std::make_shared<const PhaseResult>(PhaseResult{std::move(*body), c.last_result_contributors()})};
  }
  absl::MutexLock lock(&mu_);
  SKETCHPS_RETURN_IF_ERROR(CreateShard(layers, std::move(weights), restored));
  if (range_.lo != c.range_lo() || range_.hi != c.range_hi()) {
    shard_.reset();
    return Invalid("checkpoint.range", absl::StrCat("[", c.range_lo(), ", ", c.range_hi(), ") is not this shard's range [",
                                                    range_.lo, ", ", range_.hi, ") for ", options_.job.servers, " servers"));
  }
  return absl::OkStatus();
}

absl::Status ShardHost::CreateShard(const LayerTable& layers, std::vector<float> weights, const ShardOptions& restored) {
  SKETCHPS_ASSIGN_OR_RETURN(ShardMap map, MakeShardMap(layers, options_.job.servers));
  const ShardRange range = map.ranges[options_.shard_id];
  if (weights.size() != range.size()) {
    return Invalid("weights", absl::StrCat(weights.size(), " values, this shard's range [", range.lo, ", ", range.hi,
                                           ") has ", range.size()));
  }
  ShardOptions o = BaseShardOptions();
  o.initial_weights = std::move(weights);
  o.rounds_applied = restored.rounds_applied;
  o.velocity = restored.velocity;
  o.last = restored.last;
  layers_ = layers;
  range_ = range;
  {
    absl::MutexLock lock(&snapshot_mu_);
    template_.set_job_id(options_.job.job_id);
    template_.set_shard_id(options_.shard_id);
    template_.set_num_shards(options_.job.servers);
    template_.set_range_lo(range.lo);
    template_.set_range_hi(range.hi);
    LayersToProto(layers, template_.mutable_layers());
  }
  shard_ = std::make_shared<Shard>(std::move(o));
  if (metrics_) metrics_->SetRoundsApplied(restored.rounds_applied);
  return absl::OkStatus();
}

std::shared_ptr<Shard> ShardHost::shard() const {
  absl::MutexLock lock(&mu_);
  return shard_;
}

std::uint64_t ShardHost::rounds_applied() const {
  auto s = shard();
  return s ? s->rounds_applied() : 0;
}

absl::Status ShardHost::CheckJoinLayout(const v1::JoinRequest& request, LayerTable& layers) {
  if (request.job_id() != options_.job.job_id) {
    return Precondition("job_id", absl::StrCat("'", request.job_id(), "' is not this server's job '", options_.job.job_id, "'"));
  }
  if (request.worker_id() >= options_.job.workers) {
    return Invalid("worker_id", absl::StrCat(request.worker_id(), " is not in [0, ", options_.job.workers, ")"));
  }
  if (request.shard_id() != options_.shard_id) {
    return Invalid("shard_id", absl::StrCat(request.shard_id(), " sent to shard ", options_.shard_id));
  }
  SKETCHPS_ASSIGN_OR_RETURN(layers, LayersFromProto(request.layers()));
  return absl::OkStatus();
}

absl::StatusOr<v1::JoinResponse> ShardHost::Join(const v1::JoinRequest& request) {
  LayerTable layers;
  SKETCHPS_RETURN_IF_ERROR(CheckJoinLayout(request, layers));
  absl::MutexLock lock(&mu_);
  if (shard_ && !SameLayers(layers, layers_)) {
    return Invalid("layers", "differ from the job's layer table (another model or configuration?)");
  }
  if (!shard_ || !initial_checksum_) {
    SKETCHPS_ASSIGN_OR_RETURN(ShardMap map, MakeShardMap(layers, options_.job.servers));
    const auto n = map.ranges[options_.shard_id].size();
    SKETCHPS_ASSIGN_OR_RETURN(std::vector<float> weights, ParseF32Bytes(request.initial_weights(), n, "initial_weights"));
    const std::uint64_t checksum = WeightsChecksum(weights);
    if (!shard_) {
      SKETCHPS_RETURN_IF_ERROR(CreateShard(layers, std::move(weights), ShardOptions{}));
      spdlog::info("shard {}: created by worker {}: range [{}, {}) of {} elements", options_.shard_id, request.worker_id(),
              range_.lo, range_.hi, layers.dim());
    }
    initial_checksum_ = checksum;
  } else {
    const std::uint64_t n = range_.size();
    SKETCHPS_ASSIGN_OR_RETURN(std::vector<float> weights, ParseF32Bytes(request.initial_weights(), n, "initial_weights"));
    if (WeightsChecksum(weights) != *initial_checksum_) {
      return Invalid("initial_weights", "differ from the first worker's (a different model seed?)");
    }
  }
  v1::JoinResponse response;
  response.set_epoch(0);
  response.set_num_workers(options_.job.workers);
  response.set_num_shards(options_.job.servers);
  response.set_range_lo(range_.lo);
  response.set_range_hi(range_.hi);
  response.set_rounds_applied(shard_->rounds_applied());
  response.set_weights(F32Bytes(shard_->Weights()));
  response.set_velocity(F32Bytes(shard_->Velocity()));
  spdlog::info("shard {}: worker {} joined at round {}", options_.shard_id, request.worker_id(), shard_->rounds_applied());
  return response;
}

absl::StatusOr<v1::PushPullResponse> ShardHost::PushPull(const v1::PushPullRequest& request, absl::Time deadline) {
  in_flight_.fetch_add(1);
  auto response = PushPullLocked(request, deadline);
  in_flight_.fetch_sub(1);
  if (metrics_ && !response.ok()) metrics_->CountPush(ServerMetrics::Push::kRejected);
  return response;
}

absl::StatusOr<v1::PushPullResponse> ShardHost::PushPullLocked(const v1::PushPullRequest& request, absl::Time deadline) {
  const v1::PayloadHeader& h = request.payload().header();
  if (h.job_id() != options_.job.job_id) {
    return Precondition("payload.header.job_id", absl::StrCat("'", h.job_id(), "' is not this server's job '", options_.job.job_id, "'"));
  }
  if (h.epoch() != 0) return Precondition("payload.header.epoch", absl::StrCat(h.epoch(), " is not the current epoch 0"));
  if (h.worker_id() >= options_.job.workers) {
    return Invalid("payload.header.worker_id", absl::StrCat(h.worker_id(), " is not in [0, ", options_.job.workers, ")"));
  }
  if (h.shard_id() != options_.shard_id) {
    return Invalid("payload.header.shard_id", absl::StrCat(h.shard_id(), " sent to shard ", options_.shard_id));
  }
  if (h.phase() >= kMaxPhases) return Invalid("payload.header.phase", absl::StrCat(h.phase(), " >= ", kMaxPhases));
  auto shard = this->shard();
  if (!shard) return Precondition("shard", "no worker has joined this shard yet (call Join first)");
  const std::uint64_t applied = shard->rounds_applied();
  if (h.round() > applied) {
    return Precondition("payload.header.round", absl::StrCat(h.round(), " is ahead of this shard, which holds ", applied,
                                                            " rounds (it restarted from an older checkpoint)"));
  }
  if (h.round() + PhaseTable::kRetainRounds < applied) {
    return Precondition("payload.header.round", absl::StrCat(h.round(), " is stale: the shard holds ", applied, " rounds"));
  }
  const std::uint64_t range_len = shard->dim();
  SKETCHPS_ASSIGN_OR_RETURN(PhaseSpec spec, SpecFromProto(request.spec(), options_.job.workers, range_len));
  SKETCHPS_ASSIGN_OR_RETURN(auto body, DecodeBody(request.payload(), range_len));
  const PhaseKey key{h.round(), h.phase()};
  const bool duplicate = shard->table().HasContribution(key, h.worker_id());
  if (closing_.load() && !duplicate && !shard->table().HasAnyContribution(key)) {
    return absl::UnavailableError("the server is shutting down: retry after it restarts");
  }
  const absl::Time arrived = absl::Now();
  const bool first = !duplicate && FirstArrival(key, arrived);
  SKETCHPS_RETURN_IF_ERROR(shard->table().Submit(key, h.worker_id(), Contribution{spec, std::move(body)}));
  if (metrics_) metrics_->CountPush(duplicate ? ServerMetrics::Push::kDuplicate : ServerMetrics::Push::kAccepted);
  SKETCHPS_ASSIGN_OR_RETURN(auto result, shard->table().Await(key, std::min(deadline, arrived + options_.max_wait)));
  if (metrics_) {
    const double waited = absl::ToDoubleSeconds(absl::Now() - arrived);
    metrics_->ObservePhaseWait(waited);
    if (first) metrics_->ObserveStragglerWait(waited);
  }
  v1::PushPullResponse response;
  response.set_contributors(result->contributors);
  *response.mutable_result()->mutable_header() = h;
  SKETCHPS_RETURN_IF_ERROR(EncodeBody(result->value, response.mutable_result()));
  if (spec.final_phase) {
    response.set_rounds_applied(shard->rounds_applied());
    response.set_weights_checksum(shard->checksum());
  }
  if (metrics_) metrics_->AddBytes(request.ByteSizeLong(), response.ByteSizeLong());
  return response;
}

bool ShardHost::FirstArrival(const PhaseKey& key, absl::Time now) {
  absl::MutexLock lock(&arrivals_mu_);
  while (!first_arrival_.empty() && first_arrival_.begin()->first.round + PhaseTable::kRetainRounds < key.round) {
    first_arrival_.erase(first_arrival_.begin());
  }
  return first_arrival_.try_emplace(key, now).second;
}

absl::StatusOr<v1::GetWeightsResponse> ShardHost::GetWeights(const v1::GetWeightsRequest& request) {
  if (request.job_id() != options_.job.job_id) {
    return Precondition("job_id", absl::StrCat("'", request.job_id(), "' is not this server's job '", options_.job.job_id, "'"));
  }
  if (request.shard_id() != options_.shard_id) {
    return Invalid("shard_id", absl::StrCat(request.shard_id(), " sent to shard ", options_.shard_id));
  }
  auto shard = this->shard();
  if (!shard) return Precondition("shard", "no worker has joined this shard yet");
  v1::GetWeightsResponse response;
  response.set_rounds_applied(shard->rounds_applied());
  response.set_weights(F32Bytes(shard->Weights()));
  response.set_weights_checksum(shard->checksum());
  return response;
}

void ShardHost::OnApplied(const ShardSnapshot& snapshot) {
  if (metrics_) metrics_->SetRoundsApplied(snapshot.rounds_applied);
  {
    absl::MutexLock lock(&snapshot_mu_);
    last_snapshot_ = snapshot;
  }
  if (options_.checkpoint_dir.empty() || snapshot.rounds_applied % options_.checkpoint_every != 0) return;
  absl::MutexLock lock(&snapshot_mu_);
  if (auto st = WriteSnapshot(snapshot); !st.ok()) {
    spdlog::error("shard {}: checkpoint of round {} failed (training continues; a restart resumes from the previous one): {}",
             options_.shard_id, snapshot.rounds_applied, std::string(st.message()));
  }
}

absl::Status ShardHost::WriteSnapshot(const ShardSnapshot& s) {
  const absl::Time start = absl::Now();
  v1::ShardCheckpoint c = template_;
  c.set_rounds_applied(s.rounds_applied);
  c.set_weights(F32Bytes(s.weights));
  c.set_velocity(F32Bytes(s.velocity));
  if (s.last.result) {
    auto* last = c.mutable_last_result();
    last->mutable_header()->set_job_id(options_.job.job_id);
    last->mutable_header()->set_shard_id(options_.shard_id);
    last->mutable_header()->set_round(s.last.key.round);
    last->mutable_header()->set_phase(s.last.key.phase);
    SKETCHPS_RETURN_IF_ERROR(EncodeBody(s.last.result->value, last));
    c.set_last_result_contributors(s.last.result->contributors);
  }
  const absl::Status st = WriteCheckpoint(options_.checkpoint_dir, c);
  if (metrics_) metrics_->CountCheckpoint(st.ok(), absl::ToDoubleSeconds(absl::Now() - start));
  return st;
}

void ShardHost::BeginShutdown() { closing_.store(true); }

absl::Status ShardHost::CheckpointNow() {
  if (options_.checkpoint_dir.empty()) return absl::OkStatus();
  absl::MutexLock lock(&snapshot_mu_);
  if (!last_snapshot_) return absl::OkStatus();  // nothing applied since the start: the loaded file is current
  return WriteSnapshot(*last_snapshot_);
}

}  // namespace sketchps::server
