// The sketch -> candidates -> exact values protocol shared by gs-SGD (ALGORITHMS.md §7, Project
// decision 4) and Sketched-SGD (§5). The schemes differ only in the vector x they feed it (gs-SGD:
// a = e + g; Sketched-SGD: the momentum-corrected accumulator v) and in their state updates.
//
// Per shard range of d entries, with k = min(ctx.k, d) (at least 1) and K = min(p2 * k, d):
//   p2 > 0 (two phases):
//     phase 0  kSketchRecover, keep K: each worker sends S(x), an r x c table (4rc bytes up); the
//              shard sums the tables (linearity: S(sum x) = sum S(x)) and returns the K candidates
//              with the largest |estimate| as a SparseVector (8K bytes down);
//     phase 1  kDenseSum at_previous_indices, keep k: each worker sends x at the K candidates
//              (4K bytes up); the shard keeps the k largest exact sums (<= 8k bytes down).
//   p2 = 0 (one phase): kSketchRecover with keep k; G_t is the mean of the k sketch estimates.
// G_t = MeanAggregate(final result) is always a SparseVector of at most k entries.
//
// Sketch parameters: rows r (default 5); cols c = `cols` if set, else ceil(cols_factor * k) with
// cols_factor 10, clamped to [1, kMaxSketchCells / r] (choice: a derived size is clamped, an
// explicit one that is too large is a configuration error). The hash is the default
// kPolynomial61 family (the reducer rebuilds it from the table's rows, cols, seed and dim), seeded
// with SketchSeed(ctx.seed, ctx.shard_id), so all workers of a shard agree and shards differ. The
// hash is fixed for the whole run (as CSVec's seed 42); error feedback repairs persistent
// collisions over rounds.
//
// Not thread-safe (one per scheme instance). Device buffers: the table (r*c floats), the
// candidate values (K) and the taken index set (k).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/config_reader.h"
#include "common/count_sketch_hash.h"
#include "kernels/backend.h"
#include "schemes/error_feedback.h"
#include "schemes/scheme_base.h"

namespace sketchps {

// The sketch fields both methods' configs share (YAML keys rows, cols_factor, cols, p2).
struct SketchSizing {
  std::uint32_t rows = 5;      // r, in [1, 64]; odd recommended (even: lower median)
  double cols_factor = 10.0;   // c = ceil(cols_factor * k) when cols == 0; > 0
  std::uint64_t cols = 0;      // explicit c (0: use cols_factor); rows * cols <= 2^28
  std::uint32_t p2 = 2;        // candidates per kept entry, in [0, 1024]; 0: one phase, estimates

  // Errors name the key: "<prefix>.rows: ...".
  absl::Status Validate(const std::string& prefix) const;
  // Reads rows, cols_factor, cols and p2 (no Finish, no Validate: the config's Read does both).
  absl::Status ReadFields(ConfigReader& section);
  // The number of columns for a range that keeps k entries.
  std::uint32_t ColsFor(std::uint64_t k) const;
};

// The hash seed of one shard: the job seed mixed with the shard id (splitmix64).
std::uint64_t SketchSeed(std::uint64_t job_seed, std::uint32_t shard_id);

class SketchExchange {
 public:
  SketchExchange(const SchemeContext& ctx, const SketchSizing& sizing);

  // OK, or why the hash could not be built (e.g. dim >= 2^32); schemes return it from Accumulate.
  const absl::Status& status() const { return status_; }
  std::uint32_t phases() const { return sizing_.p2 == 0 ? 1 : 2; }
  PhaseSpec Spec(std::uint32_t phase) const;
  std::uint64_t k() const { return k_; }
  std::uint64_t candidates() const { return candidates_; }
  const CountSketchHash& hash() const { return hash_; }

  // This worker's payload of `phase` for the vector d_x (dim floats): the SketchTable of x in
  // phase 0; x at the candidates of earlier[0] (DenseValues, values copied exactly) in phase 1.
  absl::StatusOr<PayloadValue> Payload(std::uint32_t phase, const PhaseResults& earlier, const float* d_x,
                                       const kernels::Exec& exec);

  // Loads the index set of G_t (a SparseVector of at most k entries) and returns its size.
  absl::StatusOr<std::uint64_t> LoadTaken(const Aggregate& g);
  // d_x[i] = 0 for every i of the last LoadTaken set.
  absl::Status ZeroTaken(float* d_x, const kernels::Exec& exec);

 private:
  absl::StatusOr<PayloadValue> SketchPayload(const float* d_x, const kernels::Exec& exec);

  const std::uint64_t dim_;
  const SketchSizing sizing_;
  const std::uint64_t k_;
  const std::uint64_t candidates_;
  absl::Status status_;
  CountSketchHash hash_;
  kernels::DeviceArray<float> table_;
  Selection values_;
  kernels::DeviceArray<std::uint32_t> taken_;
  std::uint64_t taken_count_ = 0;
};

// Copies state.arrays[name] into dst. InvalidArgument when the array is missing or its size is not
// dst.size() ("<scheme>: state array 'residual' has 3 values, expected 64").
absl::Status RestoreArray(const SchemeState& state, const char* scheme, const char* name,
                          kernels::DeviceArray<float>& dst);

}  // namespace sketchps
