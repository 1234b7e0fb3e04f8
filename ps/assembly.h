// Assembly: how a starting shard decides the state it serves, from every worker's offer (its Join)
// and its own checkpoint, if any. A shard that starts, fresh or after a restart from an older
// checkpoint or from none, answers no Join until all P workers have offered; then DecideState picks:
//
//   w = the highest round among the offers and the checkpoint;
//   w = 0 (a new job): the workers' initial weights, which must all agree (same seed);
//   the checkpoint holds w: the checkpoint, and every offer at round w must equal it (checksum);
//   otherwise: the replica of the workers at round w, which must all be bitwise equal (their
//     weights must hash to the checksums they claim, and the checksums and momentum buffers must
//     agree), with the final result of round w - 1 they received, so that a worker still waiting
//     for that result gets it.
// Every offer must be fresh (round 0) or at round w - 1 or w: in synchronous training no worker can
// be further behind. With `reduction_state` (the scheme keeps state with the reduction: FetchSGD's
// sketches, which no worker holds), a state taken from the workers at w > 0 is refused: only the
// shard's checkpoint of round w holds the reducer's state of round w. Any violation is FailedPrecondition naming the
// workers and rounds involved, and the shard serves nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/layout.h"
#include "engine/shard.h"

namespace sketchps::ps {

// One worker's Join, decoded and checked against the range its layout gives this shard.
struct Offer {
  std::uint32_t worker = 0;
  LayerTable layers;
  std::uint64_t rounds_applied = 0;
  std::vector<float> weights;          // the range's replica
  std::vector<float> optimizer_state;  // empty: none (zeros)
  std::uint64_t checksum = 0;          // what the worker claims WeightsChecksum(weights) is
  std::optional<FinalResult> last;     // rounds_applied > 0: the final result of the round before
};

// The state a shard serves from.
struct ShardState {
  LayerTable layers;
  std::uint64_t rounds_applied = 0;
  std::vector<float> weights;
  std::vector<float> optimizer_state;
  std::optional<FinalResult> last;
  std::set<std::uint32_t> workers_left;  // from a checkpoint: the workers that had finished the job
  std::string origin;                    // for the log: "fresh start", "checkpoint of round 300", ...
  ReductionState reduction_state;        // the reducer's (engine/reduce.h); only a checkpoint holds one
  std::vector<MemberSpan> roster;        // from a checkpoint of an elastic job: every slot's span (else empty)
};

// `offers` holds one offer per worker (any order); `checkpoint` the shard's restored state.
absl::StatusOr<ShardState> DecideState(const std::vector<Offer>& offers, const std::optional<ShardState>& checkpoint,
                                       bool reduction_state = false);

}  // namespace sketchps::ps
