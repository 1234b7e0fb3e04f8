// ShardHost's rounds (ps/shard_host.h "PushPull"): a push's header and spec checked before any state is
// touched, its contribution admitted to the shard's phase table, and its answer built once the phase
// result is published (encoded once per phase and shared); the final results of recent rounds kept for
// workers left out of them (FinalFromHistory), what the strand reports for each applied round
// (OnApplied: metrics, the history, elastic joins, periodic checkpoints), and GetWeights.
#include <atomic>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/reason.h"
#include "common/status.h"
#include "common/wire/codec.h"
#include "engine/phase_proto.h"
#include "engine/phase_table.h"
#include "ps/shard_host.h"
#include "ps/shard_host_fields.h"
#include "spdlog/spdlog.h"

namespace sketchps::ps {

using host_fields::Invalid;
using host_fields::Precondition;

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

}  // namespace sketchps::ps
