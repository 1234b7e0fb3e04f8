// Reducer: the five phase reductions of engine/phase.h over one shard's range, shared by the
// in-process aggregator, the parameter server and the peer collectives. It names no method.
//
// Contributions arrive in worker-id order and are summed in that order, so a given set of payloads
// always gives the same bits. Each payload is checked against the reduction before it is used
// (Admit, which the phase table also calls for every push before storing it); a mismatch is
// InvalidArgument naming the field, and from Reduce the worker too ("worker 2: sparse.dim 10 != 12").
//
//   kDenseSum        all DenseValues of one length <= dim      -> DenseValues sum
//     at_previous_indices: length == the previous result's index count
//                                                              -> SparseVector at those indices,
//                                                                 the `keep` largest if keep > 0
//   kSparseSum       SparseVectors over dim, indices strictly increasing
//                                                              -> SparseVector of the nonzero sums
//                                                                 (keep > 0: the `keep` largest)
//   kSketchRecover   SketchTables with equal (rows, cols, seed), dim == range
//                                                              -> SparseVector of the min(keep, dim)
//                                                                 largest |estimates| of the sum; in
//                                                                 a non-final phase only their
//                                                                 indices (an IndexSet of candidates)
//   kLeaderIndexSet  IndexSets over dim                        -> the leader's set (empty if skipped)
//   kSketchMomentumError  SketchTables as kSketchRecover, in a final phase, keep > 0, spec.momentum = rho
//                                                              -> SparseVector Delta * n (below)
//
// kSketchMomentumError is the one stateful reduction (FetchSGD's sketch-space momentum and error). The
// Reducer keeps two tables of the phase's shape, S_u (momentum) and S_e (error), zero at first
// (ReductionState). With n the number of contributors and S the sum of their tables:
//   S_u = rho * S_u + S / n        (the mean sketch, as every other method's G_t is a mean)
//   S_e = S_e + S_u                 (error accumulation without the learning rate: the optimizer applies it)
//   Delta = the min(keep, dim) largest |estimates| of S_e (median over rows, ties by index)
//   every cell of S_u and of S_e where the sketch S(Delta) is nonzero is set to 0
// and the result holds Delta's values times n, so that MeanAggregate (which divides by n) gives Delta.
// The state changes only when the reduction succeeds with a finite result and finite tables; a round
// in which every worker skipped, a refused result or an error leave it untouched. Calls must come
// once per round, in round order: the owner (the shard's phase table, a peer's aggregator) ensures it.
// State() and SetState() copy the state out and in (checkpoints; SetState of an empty state clears it).
// A state of another shape than the phase's tables is InvalidArgument naming rows/cols/seed.
//
// Pre-summed contributions (the peers' all-reduce, peer/partial.h): Reduce's `contributors`, when
// given, is the number of workers the payloads stand for; it replaces the count of payloads.
//
// A sparse sum that cancels to exactly 0 drops out of the union. A phase in which every worker
// skipped yields the empty result of its kind (a plain dense sum: an empty SparseVector over dim),
// so an all-skip round completes and applies no gradient. A result with a non-finite value (finite
// payloads whose sum overflows) is not published: it becomes RefusedResult() (phase.h).
// Not thread-safe (PhaseTable serializes reductions); buffers grow to the largest phase seen and
// are reused.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/phase.h"
#include "kernels/backend.h"

namespace sketchps {

// The state of kSketchMomentumError over one range: S_u and S_e, rows * cols floats each (row-major,
// as SketchTable), for sketches of (rows, cols, seed). Empty tables: no state (zeros).
struct ReductionState {
  std::uint32_t rows = 0;
  std::uint32_t cols = 0;
  std::uint64_t seed = 0;
  std::vector<float> momentum;  // S_u
  std::vector<float> error;     // S_e

  bool empty() const { return momentum.empty() && error.empty(); }
  friend bool operator==(const ReductionState&, const ReductionState&) = default;
};

class Reducer {
 public:
  explicit Reducer(std::uint64_t dim);

  // Checks one payload against the phase: its kind matches the reduction; dense values have the
  // length of the first payload held (a final plain dense sum: exactly dim; at previous indices: the
  // previous result's index count); sparse vectors, index sets and sketches cover exactly dim, with
  // strictly increasing indices < dim and matching array sizes; a sketch table has rows * cols
  // cells and the first sketch's rows, cols and seed (the wire decoder bounds its size); every value
  // is finite. `first` is the first payload already admitted to the phase (nullptr: none).
  // InvalidArgument naming the field ("sketch.cols: 11 != 12 of the other workers"). Thread-safe.
  absl::Status Admit(const PhaseSpec& spec, const PayloadValue& payload, const PhaseResult* previous,
                     const PayloadValue* first) const;

  // `previous` is the result of the round's previous phase (nullptr in phase 0); only indexed dense
  // sums read it. `contributors`: see above (pre-summed contributions).
  absl::StatusOr<PhaseResult> Reduce(const PhaseSpec& spec, const std::vector<const Contribution*>& in_order,
                                     const PhaseResult* previous,
                                     std::optional<std::uint32_t> contributors = std::nullopt);

  // The state of the stateful reduction (empty when it never ran or was cleared).
  ReductionState State() const;
  // InvalidArgument (state untouched) when the tables' sizes differ from rows * cols.
  absl::Status SetState(const ReductionState& state);

 private:
  absl::StatusOr<PayloadValue> Dispatch(const PhaseSpec& spec, const std::vector<const Contribution*>& in,
                                        const PhaseResult* previous);
  absl::Status AdmitDense(const PhaseSpec& spec, const DenseValues& p, const PhaseResult* previous,
                          const PayloadValue* first) const;
  absl::Status AdmitSketch(const PhaseSpec& spec, const SketchTable& p, const PayloadValue* first) const;
  std::vector<float> DenseSum(const std::vector<const Contribution*>& in);
  absl::StatusOr<PayloadValue> IndexedSum(const std::vector<const Contribution*>& in, const PhaseResult* previous,
                                          std::uint64_t keep);
  absl::StatusOr<PayloadValue> SparseSum(const std::vector<const Contribution*>& in, std::uint64_t keep);
  // acc_ = the sum of the contributors' tables, in worker order; their first table (nullptr: none).
  absl::StatusOr<const SketchTable*> SumTables(const std::vector<const Contribution*>& in);
  absl::StatusOr<PayloadValue> SketchRecover(const std::vector<const Contribution*>& in, std::uint64_t keep);
  absl::StatusOr<PayloadValue> SketchMomentumError(const std::vector<const Contribution*>& in, const PhaseSpec& spec,
                                                   std::uint32_t contributors, bool& refused);
  absl::StatusOr<PayloadValue> LeaderSet(const std::vector<const Contribution*>& in, std::uint32_t leader);
  // Copies the accumulator's selected entries (device idx/val of `count`) into an index-sorted vector.
  absl::StatusOr<SparseVector> Collect(std::size_t count, bool drop_zeros);
  void Reserve(std::size_t n);

  const std::uint64_t dim_;
  kernels::Scratch scratch_;
  kernels::Exec exec_;
  kernels::DeviceArray<float> acc_;
  kernels::DeviceArray<std::uint32_t> idx_;
  kernels::DeviceArray<float> val_;
  // kSketchMomentumError: the state (S_u, S_e; empty before the first round) and the next round's
  // tables, computed aside and swapped in on success.
  ReductionState shape_;  // rows, cols, seed (its tables unused)
  kernels::DeviceArray<float> momentum_, error_, next_momentum_, next_error_, mask_;
  kernels::DeviceArray<std::uint32_t> touched_;  // the cells where mask_ is nonzero, and their values
  kernels::DeviceArray<float> touched_val_;
};

}  // namespace sketchps
