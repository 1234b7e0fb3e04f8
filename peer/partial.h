// Partial: what a rank holds while a peer collective runs (peer/schedule.h gives the steps), and how
// two partial states combine. One collective per reduction (engine/phase.h):
//
//   kSum       kDenseSum, kSketchRecover, kSketchMomentumError: one summed payload (DenseValues or SketchTable) plus
//   the
//              number of contributors; combine(low, high) = low + high elementwise, in that order;
//   kGather    kSparseSum: every covered rank's payload (or its skip), in rank order; combine
//              concatenates, so the final state holds all P payloads;
//   kTreeTopK  kSparseSum with keep > 0 when PeerConfig::sparse_tree_merge is set: one SparseVector;
//              combine(low, high) = the `keep` largest of low + high (Reducer, low added first);
//   kLeader    kLeaderIndexSet: the leader's IndexSet once the covered ranks include it, plus the
//              contributor count.
//
// The final state turns into the PhaseResult with the parameter server's own Reducer (FinishPartial),
// so post-processing (indexed sums, sketch recovery, keep-k, skips) is the PS code path; sums are fed
// to it as one contribution and the all-reduced contributor count replaces its count (passed to the
// Reducer, so the stateful sketch reduction averages by it: every rank then holds a bitwise-identical
// replica of the momentum and error sketches, in its aggregator's per-shard Reducer).
//
// Errors are InvalidArgument naming the field ("dense.count 10 != 12"); callers prefix the peer.
// Not thread-safe (the Reducer passed in belongs to one shard).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/phase.h"
#include "engine/reduce.h"

namespace sketchps::peer {

enum class Collective : std::uint8_t { kSum, kGather, kTreeTopK, kLeader };

const char* CollectiveName(Collective c);
Collective CollectiveFor(const PhaseSpec& spec, bool sparse_tree_merge);

struct Item {
  std::uint32_t origin = 0;
  std::optional<PayloadValue> payload;  // none: every rank it covers skipped (or not the leader)
};

struct Partial {
  std::uint32_t contributors = 0;
  std::vector<Item> items;
};

// The payload kind a reduction expects ("dense", "sparse", "sketch", "index_set").
const char* ExpectedKind(Reduction r);

// This rank's starting state from its own contribution. Checks the payload kind.
absl::StatusOr<Partial> LeafPartial(Collective c, const Contribution& own, std::uint32_t rank);

// Combines two partial states; `low` covers the lower ranks.
absl::StatusOr<Partial> Combine(Collective c, const PhaseSpec& spec, Partial low, Partial high, Reducer& reducer);

// The phase result from the final state. `own` is this rank's contribution (kLeader validates it as
// the PS does), `previous` the round's previous phase result (indexed dense sums).
absl::StatusOr<PhaseResult> FinishPartial(Collective c, const PhaseSpec& spec, Partial state, const Contribution& own,
                                          std::uint32_t rank, std::uint32_t num_ranks, const PhaseResult* previous,
                                          Reducer& reducer);

}  // namespace sketchps::peer
