// ShardHost's assembly (ps/shard_host.h "Lifecycle"): a Join's offer decoded and checked against the
// job (DecodeOffer); while the shard assembles, each worker's offer waits (a newer Join of a worker
// supersedes its older one) until every member has offered, then DecideState (ps/assembly.h) picks the
// state among the offers and the restored checkpoint and Serve builds the shard from it; a serving
// shard answers a Join at once with its current state (StateResponse). Elastic Joins go to
// ps/shard_host_elastic.cc.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/reason.h"
#include "common/status.h"
#include "common/wire/codec.h"
#include "common/wire/layout_proto.h"
#include "ps/shard_host.h"
#include "ps/shard_host_fields.h"
#include "spdlog/spdlog.h"

namespace sketchps::ps {

using host_fields::DecodeFinal;
using host_fields::Invalid;
using host_fields::Precondition;

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

}  // namespace sketchps::ps
