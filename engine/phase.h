// Phases: the unit of communication of every scheme.
//
// In each phase of a round every worker contributes one payload for each shard and receives one
// phase result, identical for all workers. The reduction a phase needs travels with every
// contribution (PhaseSpec), so servers and peers know reductions, never method names:
//
//   kDenseSum        DenseValues of one common length          -> their elementwise sum
//     with at_previous_indices: values aligned with the index set of the previous phase's result
//                                                               -> SparseVector at those indices
//                                                                 (keep > 0: only the `keep` largest)
//   kSparseSum       SparseVector over one dim                  -> the sum on the union of indices,
//                                                                 optionally only the `keep` largest
//   kSketchRecover   SketchTable with one (rows, cols, seed, dim) -> the summed table's `keep`
//                                                                 candidates with largest |estimate|
//                                                                 (SparseVector of estimates when the
//                                                                 phase is final, else an IndexSet)
//   kLeaderIndexSet  IndexSet (only the leader's may be non-empty) -> the leader's set
//   kSketchMomentumError  SketchTable as kSketchRecover, final phase only -> SparseVector of the `keep`
//                    largest |estimates| of an error sketch that the reduction keeps across rounds
//                    (momentum `momentum` and error accumulation in sketch space; engine/reduce.h)
//
// The result of a round's final phase is always DenseValues over the whole range or a SparseVector
// over it, and the round's aggregate G_t is that sum divided by PhaseResult::contributors
// (MeanAggregate). So the server can update its master copy without knowing the method.
//
// A worker whose gradient is not finite contributes no payload (a "skip"); it still completes every
// phase, and the result counts only the workers that did contribute.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "common/payload.h"

namespace sketchps {

// Phases per round any scheme may use (phase ids 0 .. kMaxPhases - 1, the last one being the
// auxiliary phase of engine/aggregator.h); servers and peers refuse higher ids.
inline constexpr std::uint32_t kMaxPhases = 16;

// A sketch table may hold at most this many cells per element of the range it compresses (a larger
// table would cost more than sending the range densely).
inline constexpr std::uint64_t kSketchCellsPerElement = 8;

using PayloadValue = std::variant<DenseValues, SparseVector, SketchTable, IndexSet>;

enum class Reduction : std::uint8_t { kDenseSum, kSparseSum, kSketchRecover, kLeaderIndexSet, kSketchMomentumError };

// "dense_sum", "sparse_sum", "sketch_recover", "leader_index_set", "sketch_momentum_error".
const char* ReductionName(Reduction r);

struct PhaseSpec {
  Reduction reduction = Reduction::kDenseSum;
  std::uint64_t keep = 0;            // kSparseSum / indexed kDenseSum: 0 keeps all; kSketchRecover: candidates (> 0);
                                     // kSketchMomentumError: entries of G_t (> 0)
  std::uint32_t leader = 0;          // kLeaderIndexSet: the worker whose set is taken
  bool at_previous_indices = false;  // kDenseSum: values at the previous result's indices
  bool final_phase = true;           // the round's last phase (its result yields G_t); set by SchemeBase
  // An auxiliary phase (kAuxPhase, aggregator.h): a dense sum outside the scheme's phases; it needs
  // no previous phase and never ends a round.
  bool auxiliary = false;
  // kSketchMomentumError: the momentum rho of the reduction's momentum sketch, in [0, 1); 0 elsewhere.
  double momentum = 0.0;

  friend bool operator==(const PhaseSpec&, const PhaseSpec&) = default;
};

// One worker's part of one phase on one shard. No payload means the worker skips this round.
struct Contribution {
  PhaseSpec spec;
  std::optional<PayloadValue> payload;
  // How the payload's dense or sparse values travel (the job key scheme.values; SchemeBase sets it
  // only when every value is exact in it, see scheme_base.h). Sketch tables and index sets ignore it;
  // receivers decode any encoding to float32. Not part of the spec: reductions never depend on it.
  ValueEncoding values = ValueEncoding::kF32;
};

// What every worker receives at the end of a phase. Sparse results (kSparseSum, kSketchRecover,
// kSketchMomentumError) are SparseVectors with strictly increasing indices.
struct PhaseResult {
  PayloadValue value;
  std::uint32_t contributors = 0;  // workers whose payload was included
  // The reduction or the master copy would have become non-finite (an overflowing sum): the phase
  // publishes an empty result of its kind instead, with contributors 0, and the round applies no
  // gradient (Reducer and Shard; docs/protocol.md "Numeric safety"). Not sent on the wire.
  bool refused = false;
  // The workers left out of this round up to and including this phase (sorted): a round deadline
  // closed a phase without them (engine/phase_table.h, job key ps.round_deadline_seconds). From the
  // phase that left a worker out on, the round holds nothing of it; the worker applies G_t like
  // everyone else and keeps its input for the next round (Scheme::FinishExcluded).
  std::vector<std::uint32_t> excluded = {};
  // The workers that are not members of this round (sorted; elastic membership, job key ps.elastic:
  // they have not joined yet or have left, engine/phase_table.h). Empty in a job without it.
  std::vector<std::uint32_t> absent = {};
};

// Whether `worker` is in result.excluded.
bool IsExcluded(const PhaseResult& result, std::uint32_t worker);

// The empty result a refused phase publishes: an empty IndexSet for kLeaderIndexSet, otherwise an
// empty SparseVector over dim (a round ending with it applies no gradient).
PhaseResult RefusedResult(Reduction reduction, std::uint64_t dim);
// Whether every value of the payload is finite (index sets: always).
bool AllFinite(const PayloadValue& payload);

// The averaged aggregate G_t of a round over one shard's range, as every replica applies it.
// Sparse aggregates have strictly increasing indices.
using Aggregate = std::variant<DenseValues, SparseVector>;

// G_t from a final phase's result: its DenseValues (length dim) or SparseVector (over dim) divided
// by the number of contributors. InvalidArgument for any other result or size.
absl::StatusOr<Aggregate> MeanAggregate(const PhaseResult& final_result, std::uint64_t dim);

// The indices of a result that carries an index set (IndexSet or SparseVector), else nullptr.
const std::vector<std::uint32_t>* ResultIndices(const PhaseResult& result);

// Human-readable name of a payload's kind: "dense", "sparse", "sketch", "index_set".
const char* PayloadKindName(const PayloadValue& payload);

// Bytes the payload's arrays occupy with raw encodings (u32 indices, f32 values), the size each
// method's traffic formula is stated in; with `values` kF16 or kBF16, the dense and sparse values
// count 2 bytes each (Contribution::values; sketch tables always count 4 bytes per cell).
std::uint64_t RawPayloadBytes(const PayloadValue& payload, ValueEncoding values = ValueEncoding::kF32);

}  // namespace sketchps
