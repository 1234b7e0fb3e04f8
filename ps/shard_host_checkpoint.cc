// ShardHost's checkpoints (ps/shard_host.h, ps/checkpoint.h): a loaded checkpoint checked against the
// job and turned into the state assembly may restore (Restore: range, weights, optimizer and reduction
// state, the last result, who left, the roster), and the shard's current state written out
// (SubmitCheckpoint: on the strand every checkpoint_every rounds, after a new restart point was
// adopted, after a Leave, and at shutdown; the CheckpointWriter writes it on its own thread).
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/wire/codec.h"
#include "common/wire/layout_proto.h"
#include "engine/phase_proto.h"
#include "ps/shard_host.h"
#include "ps/shard_host_fields.h"

namespace sketchps::ps {

using host_fields::DecodeFinal;
using host_fields::Invalid;
using host_fields::Precondition;

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
