#include "ps/assembly.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/reason.h"
#include "common/status.h"
#include "engine/phase_proto.h"

namespace sketchps::ps {
namespace {

absl::Status Precondition(const std::string& what) { return absl::FailedPreconditionError(what); }

absl::Status CheckLayouts(const std::vector<Offer>& offers, const std::optional<ShardState>& checkpoint) {
  for (const Offer& o : offers) {
    if (!SameLayers(o.layers, offers.front().layers)) {
      return WithReason(Precondition(absl::StrCat("layers: worker ", o.worker, "'s model layout differs from worker ",
                                                  offers.front().worker, "'s (another model or configuration?)")),
                        Reason::kModelMismatch);
    }
  }
  if (checkpoint && !SameLayers(checkpoint->layers, offers.front().layers)) {
    return WithReason(Precondition("layers: the workers' model layout differs from this shard's checkpoint "
                                   "(another model?)"),
                      Reason::kModelMismatch);
  }
  return absl::OkStatus();
}

absl::Status CheckRounds(const std::vector<Offer>& offers, std::uint64_t w) {
  for (const Offer& o : offers) {
    const std::uint64_t r = o.rounds_applied;
    if (r != 0 && r != w && r + 1 != w) {
      return Precondition(absl::StrCat("worker ", o.worker, " is at round ", r,
                                       " while the most advanced replica is at round ", w,
                                       ": no synchronous worker can be that far behind"));
    }
  }
  return absl::OkStatus();
}

// The offers at round w agree bitwise with each other (and hash to what they claim).
absl::StatusOr<const Offer*> AgreeingOffers(const std::vector<Offer>& offers, std::uint64_t w) {
  const Offer* first = nullptr;
  for (const Offer& o : offers) {
    if (o.rounds_applied != w) continue;
    if (WeightsChecksum(o.weights) != o.checksum) {
      return Precondition(absl::StrFormat("weights_checksum: worker %d's replica does not hash to the %016x it claims",
                                          o.worker, o.checksum));
    }
    if (first == nullptr) {
      first = &o;
    } else if (o.checksum != first->checksum || o.optimizer_state != first->optimizer_state) {
      // At round 0 the offers are the workers' initial weights: their models were built differently.
      return WithReason(Precondition(absl::StrCat(
                            "workers ", first->worker, " and ", o.worker, " hold different replicas at round ", w,
                            w == 0 ? " (their initial weights differ: is the model built the same "
                                     "way, after the seed is set, on every rank?)"
                                   : " (replica diverged)")),
                        w == 0 ? Reason::kModelMismatch : Reason::kReplicaDiverged);
    }
  }
  return first;
}

}  // namespace

absl::StatusOr<ShardState> DecideState(const std::vector<Offer>& offers, const std::optional<ShardState>& checkpoint,
                                       bool reduction_state) {
  if (offers.empty()) return Precondition("no worker has offered its state");
  SKETCHPS_RETURN_IF_ERROR(CheckLayouts(offers, checkpoint));
  std::uint64_t w = checkpoint ? checkpoint->rounds_applied : 0;
  for (const Offer& o : offers) w = std::max(w, o.rounds_applied);
  SKETCHPS_RETURN_IF_ERROR(CheckRounds(offers, w));
  SKETCHPS_ASSIGN_OR_RETURN(const Offer* best, AgreeingOffers(offers, w));
  if (checkpoint && checkpoint->rounds_applied == w) {
    const std::uint64_t mine = WeightsChecksum(checkpoint->weights);
    if (best != nullptr && w > 0 && best->checksum != mine) {
      return WithReason(Precondition(absl::StrFormat("worker %d's replica at round %d differs from this shard's "
                                                     "checkpoint (%016x vs %016x): replica diverged",
                                                     best->worker, w, best->checksum, mine)),
                        Reason::kReplicaDiverged);
    }
    ShardState state = *checkpoint;
    state.origin = absl::StrCat("its checkpoint of round ", w);
    return state;
  }
  if (best == nullptr) return Precondition(absl::StrCat("no offer holds round ", w));
  if (reduction_state && w > 0) {
    return Precondition(absl::StrCat(
        "scheme.name: the scheme keeps state with the reduction on this shard (e.g. momentum and error ",
        "sketches), which no worker holds; the workers are at round ", w, " but this shard's checkpoint ",
        checkpoint ? absl::StrCat("holds round ", checkpoint->rounds_applied) : std::string("is missing"),
        ". Resume the job from a round every shard's checkpoint holds (checkpoint.dir; checkpoint.every_rounds: 1 ",
        "keeps the loss to the last round), or use a scheme without reduction state"));
  }
  if (w > 0 && !best->last) {
    return Precondition(
        absl::StrCat("last_result: worker ", best->worker, " offers round ", w, " without its final result"));
  }
  ShardState state{best->layers, w, best->weights, best->optimizer_state, best->last, {}, "", {}, {}};
  state.origin =
      w == 0 ? "the workers' initial weights (fresh start)"
             : absl::StrCat("worker ", best->worker, "'s replica at round ", w,
                            checkpoint ? absl::StrCat(" (its checkpoint held round ", checkpoint->rounds_applied, ")")
                                       : std::string(" (no checkpoint)"));
  return state;
}

}  // namespace sketchps::ps
