#include "ps/shard_host.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checksum.h"
#include "common/reason.h"
#include "common/status.h"
#include "common/wire/codec.h"
#include "engine/phase_proto.h"
#include "engine/phase_table.h"
#include "ps/checkpoint.h"
#include "spdlog/spdlog.h"

namespace sketchps::ps {
namespace {

absl::Status Precondition(absl::string_view field, absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(field, ": ", what));
}
absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

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

}  // namespace

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

absl::StatusOr<ShardState> ShardHost::Restore(const v1::ShardCheckpoint& c) {
  SKETCHPS_ASSIGN_OR_RETURN(LayerTable layers, LayersFromProto(c.layers(), "checkpoint.layers"));
  SKETCHPS_ASSIGN_OR_RETURN(ShardMap map, MakeShardMap(layers, options_.job.servers));
  const ShardRange range = map.ranges[options_.shard_id];
  if (range.lo != c.range_lo() || range.hi != c.range_hi()) {
    return Invalid("checkpoint.range",
                   absl::StrCat("[", c.range_lo(), ", ", c.range_hi(), ") is not this shard's range [", range.lo, ", ",
                                range.hi, ") for ", options_.job.servers, " servers"));
  }
  ShardState state;
  state.layers = std::move(layers);
  state.rounds_applied = c.rounds_applied();
  SKETCHPS_ASSIGN_OR_RETURN(state.weights, ParseF32Bytes(c.weights(), range.size(), "checkpoint.weights"));
  if (!c.optimizer_state().empty()) {
    SKETCHPS_ASSIGN_OR_RETURN(state.optimizer_state, ParseF32Bytes(c.optimizer_state(), StateSize(range.size()),
                                                                   "checkpoint.optimizer_state"));
  }
  if (c.has_reduction_state()) {
    const auto& r = c.reduction_state();
    const std::uint64_t cells = std::uint64_t{r.rows()} * r.cols();
    if (r.rows() == 0 || r.cols() == 0 || cells > kSketchCellsPerElement * range.size()) {
      return Invalid("checkpoint.reduction_state",
                     absl::StrCat(r.rows(), " x ", r.cols(), " sketches for a range of ", range.size(), " entries"));
    }
    state.reduction_state.rows = r.rows();
    state.reduction_state.cols = r.cols();
    state.reduction_state.seed = r.seed();
    SKETCHPS_ASSIGN_OR_RETURN(state.reduction_state.momentum,
                              ParseF32Bytes(r.momentum(), cells, "checkpoint.reduction_state.momentum"));
    SKETCHPS_ASSIGN_OR_RETURN(state.reduction_state.error,
                              ParseF32Bytes(r.error(), cells, "checkpoint.reduction_state.error"));
  }
  if (c.rounds_applied() > 0) {
    if (!c.has_last_result()) return Invalid("checkpoint.last_result", "missing");
    SKETCHPS_ASSIGN_OR_RETURN(
        state.last, DecodeFinal(c.last_result(), c.last_result_contributors(), range.size(), "checkpoint.last_result"));
    if (state.last->key.round + 1 != c.rounds_applied()) {
      return Invalid("checkpoint.last_result.header.round",
                     absl::StrCat(state.last->key.round, " is not the last applied round"));
    }
  }
  for (std::uint32_t w : c.workers_left()) {
    if (w >= options_.job.workers) {
      return Invalid("checkpoint.workers_left", absl::StrCat(w, " is not in [0, ", options_.job.workers, ")"));
    }
    state.workers_left.insert(w);
  }
  SKETCHPS_ASSIGN_OR_RETURN(state.roster, RosterFromProto(c, options_.job.workers));
  return state;
}

absl::StatusOr<Offer> ShardHost::DecodeOffer(const v1::JoinRequest& r) const {
  if (r.job_id() != options_.job.job_id) {
    return Precondition("job_id",
                        absl::StrCat("'", r.job_id(), "' is not this server's job '", options_.job.job_id, "'"));
  }
  if (r.worker_id() >= options_.job.workers) {
    return Invalid("worker_id", absl::StrCat(r.worker_id(), " is not in [0, ", options_.job.workers, ")"));
  }
  if (r.shard_id() != options_.shard_id)
    return Invalid("shard_id", absl::StrCat(r.shard_id(), " sent to shard ", options_.shard_id));
  SKETCHPS_RETURN_IF_ERROR(CheckFingerprint(options_.job.fingerprint, FingerprintFromProto(r.fingerprint()),
                                            absl::StrCat("worker ", r.worker_id())));
  Offer offer;
  offer.worker = r.worker_id();
  offer.rounds_applied = r.rounds_applied();
  offer.checksum = r.weights_checksum();
  SKETCHPS_ASSIGN_OR_RETURN(offer.layers, LayersFromProto(r.layers()));
  if (!options_.job.layout.layers.empty() && !SameLayers(offer.layers, options_.job.layout)) {
    return WithReason(Precondition("layers",
                                   "differ from the job's model layout (another model, or another version "
                                   "of it?)"),
                      Reason::kModelMismatch);
  }
  SKETCHPS_ASSIGN_OR_RETURN(ShardMap map, MakeShardMap(offer.layers, options_.job.servers));
  const std::uint64_t n = map.ranges[options_.shard_id].size();
  SKETCHPS_ASSIGN_OR_RETURN(offer.weights, ParseF32Bytes(r.weights(), n, "weights"));
  if (!r.optimizer_state().empty()) {
    SKETCHPS_ASSIGN_OR_RETURN(offer.optimizer_state,
                              ParseF32Bytes(r.optimizer_state(), StateSize(n), "optimizer_state"));
  }
  if (r.rounds_applied() > 0) {
    if (!r.has_last_result())
      return Invalid("last_result", absl::StrCat("missing for a replica at round ", r.rounds_applied()));
    SKETCHPS_ASSIGN_OR_RETURN(offer.last, DecodeFinal(r.last_result(), r.last_result_contributors(), n, "last_result"));
    if (offer.last->key.round + 1 != r.rounds_applied()) {
      return Invalid("last_result.header.round",
                     absl::StrCat(offer.last->key.round, " is not round ", r.rounds_applied() - 1));
    }
  }
  return offer;
}

void ShardHost::Join(const v1::JoinRequest& request, const std::optional<Identity>& caller, JoinReply reply) {
  MarkCall();
  if (released_.load()) return reply(Stopping());
  if (auto st = CheckWorker(caller, request.worker_id(), "worker_id"); !st.ok()) return reply(st);
  auto offer = DecodeOffer(request);
  if (!offer.ok()) return reply(offer.status());
  if (request.elastic_join()) return ElasticJoin(*offer, request.member_from(), std::move(reply));
  std::vector<std::pair<JoinReply, absl::StatusOr<v1::JoinResponse>>> replies;
  {
    absl::MutexLock lock(&mu_);
    if (shard_) {
      if (!SameLayers(offer->layers, layers_)) {
        replies.emplace_back(std::move(reply),
                             Invalid("layers", "differ from the job's layer table (another model or configuration?)"));
      } else if (offer->rounds_applied > shard_->rounds_applied()) {
        replies.emplace_back(
            std::move(reply),
            Precondition("rounds_applied", absl::StrCat(offer->rounds_applied, " is ahead of this shard's ",
                                                        shard_->rounds_applied(), " rounds")));
      } else {
        replies.emplace_back(std::move(reply), StateResponse(*shard_));
        spdlog::info("shard {}: worker {} joined at round {}", options_.shard_id, offer->worker,
                     shard_->rounds_applied());
      }
    } else {
      const std::uint32_t worker = offer->worker;
      if (auto old = joining_.find(worker); old != joining_.end()) {
        replies.emplace_back(
            std::move(old->second.reply),
            WithReason(absl::AbortedError("superseded by a newer Join of this worker"), Reason::kSuperseded));
      }
      joining_[worker] = PendingJoin{*std::move(offer), std::move(reply)};
      spdlog::info("shard {}: worker {} offered its replica at round {}; {}", options_.shard_id, worker,
                   joining_[worker].offer.rounds_applied, AssemblyStatusLocked());
      if (AssemblyComplete()) {
        std::vector<Offer> offers;
        for (auto& [w, p] : joining_) offers.push_back(p.offer);
        auto state = DecideState(offers, restored_, options_.job.reduction_state);
        absl::Status served = state.ok() ? Serve(*std::move(state)) : state.status();
        if (!served.ok())
          spdlog::error("shard {}: cannot assemble its state: {}", options_.shard_id, std::string(served.message()));
        for (auto& [w, p] : joining_) {
          replies.emplace_back(std::move(p.reply), served.ok()
                                                       ? absl::StatusOr<v1::JoinResponse>(StateResponse(*shard_))
                                                       : absl::StatusOr<v1::JoinResponse>(served));
        }
        joining_.clear();
      }
    }
  }
  for (auto& [r, response] : replies) r(std::move(response));
}

std::string ShardHost::AssemblyStatus() const {
  absl::MutexLock lock(&mu_);
  return AssemblyStatusLocked();
}

std::string ShardHost::AssemblyStatusLocked() const {
  if (shard_) return "serving";
  std::vector<std::uint32_t> missing;
  const std::vector<std::uint32_t> expected = AssemblyMembers();
  for (std::uint32_t w : expected) {
    if (!joining_.contains(w)) missing.push_back(w);
  }
  if (missing.empty()) return absl::StrCat("every worker has joined (", expected.size(), "): assembling");
  return absl::StrCat("waiting for worker(s) ", absl::StrJoin(missing, ", "), " to join (",
                      expected.size() - missing.size(), " of ", expected.size(), " joined)");
}

absl::Status ShardHost::Serve(ShardState state) {
  SKETCHPS_ASSIGN_OR_RETURN(ShardMap map, MakeShardMap(state.layers, options_.job.servers));
  const ShardRange range = map.ranges[options_.shard_id];
  template_.set_job_id(options_.job.job_id);
  template_.set_shard_id(options_.shard_id);
  template_.set_num_shards(options_.job.servers);
  template_.set_range_lo(range.lo);
  template_.set_range_hi(range.hi);
  LayersToProto(state.layers, template_.mutable_layers());
  ShardOptions o;
  o.num_workers = options_.job.workers;
  o.initial_weights = std::move(state.weights);
  o.optimizer = options_.job.optimizer;
  o.global_momentum = options_.job.global_momentum;
  o.layers = ClipLayers(state.layers, range.lo, range.hi);
  o.rounds_per_epoch = options_.job.rounds_per_epoch;
  o.rounds_applied = state.rounds_applied;
  o.optimizer_state = std::move(state.optimizer_state);
  o.reduction_state = std::move(state.reduction_state);
  o.last = state.last;
  o.on_applied = [this](const AppliedRound& round) { OnApplied(round); };
  o.own_strand = true;
  o.round_deadline = options_.job.round_deadline;
  o.elastic = options_.job.elastic;
  if (o.elastic) o.roster = restored_ ? restored_->roster : std::vector<MemberSpan>{};
  layers_ = std::move(state.layers);
  shard_ = std::make_shared<Shard>(std::move(o));
  if (metrics_) metrics_->SetRoundsApplied(state.rounds_applied);
  spdlog::info("shard {}: serving range [{}, {}) of {} elements from {}", options_.shard_id, range.lo, range.hi,
               layers_.dim(), state.origin);
  const bool adopted = !restored_ || restored_->rounds_applied != state.rounds_applied;
  if (adopted && state.rounds_applied > 0) SubmitCheckpoint(*shard_);  // the new restart point
  restored_.reset();
  loaded_.reset();
  return absl::OkStatus();
}

v1::JoinResponse ShardHost::StateResponse(const Shard& shard) const {
  const ShardSnapshot s = shard.Snapshot();
  v1::JoinResponse response;
  response.set_epoch(0);
  response.set_num_workers(options_.job.workers);
  response.set_num_shards(options_.job.servers);
  response.set_range_lo(template_.range_lo());
  response.set_range_hi(template_.range_hi());
  response.set_rounds_applied(s.rounds_applied);
  response.set_weights(F32Bytes(s.weights));
  response.set_optimizer_state(F32Bytes(s.optimizer_state));
  return response;
}

std::shared_ptr<Shard> ShardHost::shard() const {
  absl::MutexLock lock(&mu_);
  return shard_;
}

std::uint64_t ShardHost::rounds_applied() const {
  auto s = shard();
  return s ? s->rounds_applied() : 0;
}

absl::Status ShardHost::CheckHeader(const v1::PayloadHeader& h) const {
  if (h.job_id() != options_.job.job_id) {
    return Precondition("payload.header.job_id",
                        absl::StrCat("'", h.job_id(), "' is not this server's job '", options_.job.job_id, "'"));
  }
  if (h.epoch() != 0)
    return Precondition("payload.header.epoch", absl::StrCat(h.epoch(), " is not the current epoch 0"));
  if (h.worker_id() >= options_.job.workers) {
    return Invalid("payload.header.worker_id",
                   absl::StrCat(h.worker_id(), " is not in [0, ", options_.job.workers, ")"));
  }
  if (h.shard_id() != options_.shard_id) {
    return Invalid("payload.header.shard_id", absl::StrCat(h.shard_id(), " sent to shard ", options_.shard_id));
  }
  if (h.phase() >= kMaxPhases) return Invalid("payload.header.phase", absl::StrCat(h.phase(), " >= ", kMaxPhases));
  return absl::OkStatus();
}

absl::StatusOr<PhaseKey> ShardHost::Admit(const v1::PushPullRequest& request, Shard& shard, bool& first) {
  const v1::PayloadHeader& h = request.payload().header();
  SKETCHPS_ASSIGN_OR_RETURN(PhaseSpec spec, SpecFromProto(request.spec(), options_.job.workers, shard.dim()));
  SKETCHPS_ASSIGN_OR_RETURN(auto body, DecodeBody(request.payload(), shard.dim()));
  const PhaseKey key{h.round(), h.phase()};
  const bool duplicate = shard.table().HasContribution(key, h.worker_id());
  if (closing_.load() && !duplicate && !shard.table().HasAnyContribution(key)) return Stopping();
  const absl::Time arrived = absl::Now();
  if (auto st = shard.table().Submit(key, h.worker_id(), Contribution{spec, std::move(body)}); !st.ok()) {
    if (IsRoundAhead(st)) {
      return Precondition("payload.header.round",
                          absl::StrCat(st.message(), " (it restarted from an older checkpoint?)"));
    }
    return st;
  }
  first = !duplicate && FirstArrival(key, arrived);
  if (metrics_) metrics_->CountPush(duplicate ? ServerMetrics::Push::kDuplicate : ServerMetrics::Push::kAccepted);
  return key;
}

void ShardHost::PushPull(const v1::PushPullRequest& request, const std::optional<Identity>& caller, PushReply reply) {
  MarkCall();
  in_flight_.fetch_add(1);
  // Answered once: by its phase, or by ReleaseInFlight at shutdown (which holds a copy meanwhile).
  auto answered = std::make_shared<std::atomic<bool>>(false);
  const std::uint64_t id = next_call_id_.fetch_add(1);
  PushReply done = [this, id, answered, reply = std::move(reply)](absl::StatusOr<v1::PushPullResponse> response) {
    if (answered->exchange(true)) return;
    {
      absl::MutexLock lock(&calls_mu_);
      waiting_calls_.erase(id);
    }
    if (metrics_ && !response.ok()) metrics_->CountPush(ServerMetrics::Push::kRejected);
    reply(std::move(response));
    in_flight_.fetch_sub(1);
  };
  {
    absl::MutexLock lock(&calls_mu_);
    waiting_calls_.emplace(id, done);
  }
  // After ReleaseInFlight nothing waits any more: the gRPC server's shutdown would cancel it.
  if (released_.load()) return done(Stopping());
  if (auto st = CheckHeader(request.payload().header()); !st.ok()) return done(st);
  if (auto st = CheckWorker(caller, request.payload().header().worker_id(), "payload.header.worker_id"); !st.ok()) {
    return done(st);
  }
  std::shared_ptr<Shard> shard = this->shard();
  if (!shard) {
    return done(WithReason(Precondition("shard", absl::StrCat("this shard is assembling its state (it started or "
                                                              "restarted): join again with your replica; ",
                                                              AssemblyStatus())),
                           Reason::kRejoin));
  }
  if (auto old = FinalFromHistory(request, *shard)) {
    // A left-out worker fetching a round its phase table no longer holds.
    Asked asked{old->key, request.payload().header(), true, request.ByteSizeLong(), absl::Now(), false};
    return Answer(asked, *shard, old->result, std::move(done));
  }
  bool first = false;
  const absl::Time arrived = absl::Now();
  auto key = Admit(request, *shard, first);
  if (!key.ok()) return done(key.status());
  // The request may be gone by the time the phase completes (the call's deadline passed): keep what
  // the answer needs.
  Asked asked{*key, request.payload().header(), request.spec().final_phase(), request.ByteSizeLong(), arrived, first};
  shard->table().Subscribe(*key, [this, asked = std::move(asked), shard, done = std::move(done)](
                                     absl::StatusOr<std::shared_ptr<const PhaseResult>> outcome) mutable {
    Answer(asked, *shard, std::move(outcome), std::move(done));
  });
}

void ShardHost::Answer(const Asked& asked, Shard& shard, absl::StatusOr<std::shared_ptr<const PhaseResult>> outcome,
                       PushReply reply) {
  const PhaseKey& key = asked.key;
  if (!outcome.ok()) return reply(outcome.status());
  if (metrics_) {
    const double waited = absl::ToDoubleSeconds(absl::Now() - asked.arrived);
    metrics_->ObservePhaseWait(waited);
    if (asked.first) metrics_->ObserveStragglerWait(waited);
  }
  auto encoded = EncodedResult(key, **outcome);
  if (!encoded.ok()) return reply(encoded.status());
  v1::PushPullResponse response;
  response.set_contributors((*outcome)->contributors);
  response.set_excluded(IsExcluded(**outcome, asked.header.worker_id()));
  for (std::uint32_t w : (*outcome)->absent) response.add_absent(w);
  response.set_shard_rounds_applied(shard.rounds_applied());
  *response.mutable_result() = **encoded;
  *response.mutable_result()->mutable_header() = asked.header;
  if (asked.final_phase) {
    absl::MutexLock lock(&results_mu_);
    if (auto it = applied_.find(key.round); it != applied_.end()) {
      response.set_rounds_applied(it->second.rounds_applied);
      response.set_weights_checksum(it->second.checksum);
    } else {
      response.set_rounds_applied(shard.rounds_applied());
      response.set_weights_checksum(shard.checksum());
    }
  }
  if (metrics_) metrics_->AddBytes(asked.request_bytes, response.ByteSizeLong());
  reply(std::move(response));
}

absl::StatusOr<std::shared_ptr<const v1::Payload>> ShardHost::EncodedResult(const PhaseKey& key,
                                                                            const PhaseResult& result) {
  absl::MutexLock lock(&results_mu_);
  if (auto it = encoded_.find(key); it != encoded_.end()) return it->second;
  auto payload = std::make_shared<v1::Payload>();
  SKETCHPS_RETURN_IF_ERROR(EncodeBody(result.value, payload.get()));
  while (!encoded_.empty() && encoded_.begin()->first.round + PhaseTable::kRetainRounds < key.round)
    encoded_.erase(encoded_.begin());
  encoded_.emplace(key, payload);
  return std::shared_ptr<const v1::Payload>(std::move(payload));
}

bool ShardHost::FirstArrival(const PhaseKey& key, absl::Time now) {
  absl::MutexLock lock(&arrivals_mu_);
  while (!first_arrival_.empty() && first_arrival_.begin()->first.round + PhaseTable::kRetainRounds < key.round) {
    first_arrival_.erase(first_arrival_.begin());
  }
  return first_arrival_.try_emplace(key, now).second;
}

absl::StatusOr<v1::GetWeightsResponse> ShardHost::GetWeights(const v1::GetWeightsRequest& request,
                                                             const std::optional<Identity>& caller) {
  MarkCall();
  if (caller && caller->role != Identity::Role::kWorker) {
    return absl::PermissionDeniedError(absl::StrCat("GetWeights: ", caller->Name(), " is not a worker of this job"));
  }
  if (request.job_id() != options_.job.job_id) {
    return Precondition("job_id",
                        absl::StrCat("'", request.job_id(), "' is not this server's job '", options_.job.job_id, "'"));
  }
  if (request.shard_id() != options_.shard_id) {
    return Invalid("shard_id", absl::StrCat(request.shard_id(), " sent to shard ", options_.shard_id));
  }
  auto shard = this->shard();
  if (!shard && request.rounds_only()) {
    // A joiner waiting for its round: assembly will end, ask again.
    return absl::UnavailableError(absl::StrCat("shard ", options_.shard_id, " has no state yet: ", AssemblyStatus()));
  }
  if (!shard) return Precondition("shard", absl::StrCat("no state yet: ", AssemblyStatus()));
  v1::GetWeightsResponse response;
  if (request.rounds_only()) {
    response.set_rounds_applied(shard->rounds_applied());
    return response;
  }
  const ShardSnapshot s = shard->Snapshot();
  response.set_rounds_applied(s.rounds_applied);
  response.set_weights(F32Bytes(s.weights));
  response.set_weights_checksum(s.checksum);
  return response;
}

absl::StatusOr<v1::LeaveResponse> ShardHost::Leave(const v1::LeaveRequest& request,
                                                   const std::optional<Identity>& caller) {
  MarkCall();
  if (request.job_id() != options_.job.job_id) {
    return Precondition("job_id",
                        absl::StrCat("'", request.job_id(), "' is not this server's job '", options_.job.job_id, "'"));
  }
  if (request.worker_id() >= options_.job.workers) {
    return Invalid("worker_id", absl::StrCat(request.worker_id(), " is not in [0, ", options_.job.workers, ")"));
  }
  if (request.shard_id() != options_.shard_id) {
    return Invalid("shard_id", absl::StrCat(request.shard_id(), " sent to shard ", options_.shard_id));
  }
  SKETCHPS_RETURN_IF_ERROR(CheckWorker(caller, request.worker_id(), "worker_id"));
  v1::LeaveResponse response;
  if (request.failed()) {
    // A failure report, not a departure: the worker is not counted as having left, so the shard keeps
    // serving (a restarted worker rejoins) until the job ends or it is stopped.
    absl::MutexLock lock(&left_mu_);
    spdlog::warn("shard {}: worker {} failed at round {}: {} ({} of {} workers finished)", options_.shard_id,
                 request.worker_id(), request.rounds_applied(),
                 request.reason().empty() ? std::string("no reason given") : request.reason().substr(0, 1000),
                 left_.size(), options_.job.workers);
    response.set_workers_left(static_cast<std::uint32_t>(left_.size()));
    return response;
  }
  std::shared_ptr<Shard> shard;
  std::optional<v1::ShardCheckpoint> unassembled;  // restarted, not serving yet: its checkpoint
  {
    absl::MutexLock lock(&mu_);
    shard = shard_;
    // A shard restarted after the last round may hear from workers that finished before its crash.
    const std::uint64_t held = shard ? shard->rounds_applied() : (restored_ ? restored_->rounds_applied : 0);
    if (!shard && !restored_) return Precondition("shard", "a shard without state has no job to leave");
    if (request.rounds_applied() != held) {
      return Precondition("rounds_applied", absl::StrCat(request.rounds_applied(), " != this shard's ", held,
                                                         ": the worker has not finished the job this shard holds"));
    }
    if (!shard) unassembled = loaded_;
  }
  if (options_.job.elastic && shard) SKETCHPS_RETURN_IF_ERROR(ElasticLeave(*shard, request));
  bool added = false;
  {
    absl::MutexLock lock(&left_mu_);
    added = left_.insert(request.worker_id()).second;
    if (added && !options_.job.elastic) {
      spdlog::info("shard {}: worker {} finished the job ({} of {} workers)", options_.shard_id, request.worker_id(),
                   left_.size(), options_.job.workers);
    }
    response.set_workers_left(static_cast<std::uint32_t>(left_.size()));
  }
  // Persist who left, so that a restart of this shard does not wait for them.
  if (added && shard) SubmitCheckpoint(*shard);
  if (added && unassembled && writer_) {
    SetWorkersLeft(*unassembled);
    writer_->Submit(*std::move(unassembled));
  }
  return response;
}

void ShardHost::SetWorkersLeft(v1::ShardCheckpoint& c) const {
  absl::MutexLock lock(&left_mu_);
  c.clear_workers_left();
  for (std::uint32_t w : left_) c.add_workers_left(w);
}

bool ShardHost::job_done() const {
  if (options_.job.elastic) {
    std::shared_ptr<Shard> shard = this->shard();
    absl::MutexLock lock(&left_mu_);
    return shard && !left_.empty() && shard->table().ActiveMembers() == 0;
  }
  absl::MutexLock lock(&left_mu_);
  return left_.size() == options_.job.workers;
}

std::optional<FinalResult> ShardHost::FinalFromHistory(const v1::PushPullRequest& request, const Shard& shard) {
  const auto& h = request.payload().header();
  if (request.payload().body_case() != v1::Payload::BODY_NOT_SET || !request.spec().final_phase() ||
      request.spec().auxiliary() || h.round() + PhaseTable::kRetainRounds >= shard.rounds_applied()) {
    return std::nullopt;  // a contribution, or a round the phase table still answers
  }
  absl::MutexLock lock(&results_mu_);
  auto it = applied_.find(h.round());
  if (it == applied_.end() || !it->second.last.result || it->second.last.key.phase != h.phase()) return std::nullopt;
  return it->second.last;
}

void ShardHost::TickDeadlines() {
  const absl::Duration deadline = options_.job.round_deadline;
  const absl::Duration tick = std::clamp(deadline / 10, absl::Milliseconds(1), absl::Milliseconds(50));
  std::map<std::uint32_t, std::uint64_t> times_left_out;  // by worker, for the log
  while (!stop_ticker_.WaitForNotificationWithTimeout(tick)) {
    std::shared_ptr<Shard> shard = this->shard();
    if (!shard) continue;
    for (const auto& closed : shard->table().CloseExpired(absl::Now())) {
      if (closed.auxiliary) {
        spdlog::info(
            "shard {}: round {} phase {} (the workers' sums: evaluation counts) closed at its deadline "
            "without worker(s) {}, left out of that round: the sums cover the others only",
            options_.shard_id, closed.key.round, closed.key.phase, absl::StrJoin(closed.left_out, ", "));
        continue;
      }
      if (metrics_) metrics_->CountLeftOut(closed.left_out.size());
      for (std::uint32_t w : closed.left_out) {
        // Every time for the first ten, then every hundredth: a worker that is always late would
        // otherwise write a line per round.
        const std::uint64_t n = ++times_left_out[w];
        if (n > 10 && n % 100 != 0) continue;
        spdlog::info(
            "shard {}: round {} phase {} closed at its deadline ({} s) without worker {} ({} time(s) so far); its "
            "gradient goes into its next round",
            options_.shard_id, closed.key.round, closed.key.phase, absl::ToDoubleSeconds(deadline), w, n);
      }
    }
  }
}

void ShardHost::OnApplied(const AppliedRound& round) {
  if (metrics_) metrics_->SetRoundsApplied(round.rounds_applied);
  if (round.refused) {
    if (metrics_) metrics_->CountRefusedRound();
    spdlog::warn("shard {}: round {} refused (its sum or update was not finite): no gradient applied",
                 options_.shard_id, round.last.key.round);
  }
  {
    absl::MutexLock lock(&results_mu_);
    applied_[round.last.key.round] = round;
    applied_bytes_ += round.last.result ? RawPayloadBytes(round.last.result->value) : 0;
    while (applied_.size() > PhaseTable::kRetainRounds + 2 &&
           (applied_.size() > kHistoryRounds || applied_bytes_ > kHistoryBytes)) {
      const auto& oldest = applied_.begin()->second.last.result;
      applied_bytes_ -= oldest ? RawPayloadBytes(oldest->value) : 0;
      applied_.erase(applied_.begin());
    }
  }
  AnswerElasticJoins(round.rounds_applied);
  if (!writer_ || round.rounds_applied % options_.checkpoint_every != 0) return;
  std::shared_ptr<Shard> shard = this->shard();
  if (shard) SubmitCheckpoint(*shard);  // on the strand: the state of exactly this round
}

void ShardHost::SubmitCheckpoint(const Shard& shard) {
  if (!writer_) return;
  const ShardSnapshot s = shard.Snapshot();
  v1::ShardCheckpoint c = template_;
  c.set_rounds_applied(s.rounds_applied);
  c.set_weights(F32Bytes(s.weights));
  c.set_optimizer_state(F32Bytes(s.optimizer_state));
  if (!s.reduction_state.empty()) {
    auto* r = c.mutable_reduction_state();
    r->set_rows(s.reduction_state.rows);
    r->set_cols(s.reduction_state.cols);
    r->set_seed(s.reduction_state.seed);
    r->set_momentum(F32Bytes(s.reduction_state.momentum));
    r->set_error(F32Bytes(s.reduction_state.error));
  }
  if (s.last.result) {
    auto* last = c.mutable_last_result();
    if (!EncodeBody(s.last.result->value, last).ok()) return;  // a published result always encodes
    last->mutable_header()->set_job_id(options_.job.job_id);
    last->mutable_header()->set_shard_id(options_.shard_id);
    last->mutable_header()->set_round(s.last.key.round);
    last->mutable_header()->set_phase(s.last.key.phase);
    c.set_last_result_contributors(s.last.result->contributors);
  }
  SetWorkersLeft(c);
  if (options_.job.elastic) SetRoster(shard.table(), c);
  writer_->Submit(std::move(c));
}

}  // namespace sketchps::ps
