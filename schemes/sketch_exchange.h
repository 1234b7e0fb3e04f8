// The sketch -> candidates -> exact values protocol shared by gs-SGD (docs/methods.md, decision 4)
// and Sketched-SGD. The schemes differ only in the vector x they feed it (gs-SGD:
// a = e + g; Sketched-SGD: the momentum-corrected accumulator v) and in their state updates.
//
// Per shard range of d entries, with k = min(ctx.k, d) (at least 1) and K = min(p2 * k, d):
//   p2 > 0 (two phases):
//     phase 0  kSketchRecover, keep K: each worker sends S(x), an r x c table (4rc bytes up, 2rc
//              with table: f16); the shard sums the tables (linearity: S(sum x) = sum S(x)) and
//              returns the K candidates with the largest |estimate| as an index set (delta-varint
//              coded: about 1.5 bytes per candidate down);
//     phase 1  kDenseSum at_previous_indices: each worker sends x at the K candidates (4K bytes up);
//              the shard returns the exact sums at every candidate (keep: candidates, the default:
//              about 5.5K bytes down) or only the k largest (keep: top_k).
//   p2 = 0 (one phase): kSketchRecover with keep k; G_t is the mean of the k sketch estimates.
// G_t = MeanAggregate(final result) is always a SparseVector of at most max_taken() entries.
//
// Sketch parameters: rows r (default 5); cols c = `cols` if set, else ceil(cols_factor * k) with
// cols_factor 4, clamped to [1, min(kMaxSketchCells, kSketchCellsPerElement * d) / r] (choice: a derived size
// is clamped, an explicit one that is too large is a configuration error: status()). The hash is the default
// kPolynomial61 family (the reducer rebuilds it from the table's rows, cols, seed and dim), seeded
// with SketchSeed(ctx.seed, ctx.shard_id), so all workers of a shard agree and shards differ. The
// hash is fixed for the whole run (as CSVec's seed 42); error feedback repairs persistent
// collisions over rounds.
//
// K adapts within a byte budget when budget_factor > 1 or recovery_floor > 0 (schemes/recovery_floor.h);
// the buffers are sized for its cap K_max.
//
// Not thread-safe (one per scheme instance). Device buffers: the table (r*c floats), the
// candidate values (K_max) and the taken index set (max_taken()).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/config/config_reader.h"
#include "common/count_sketch_hash.h"
#include "kernels/backend.h"
#include "schemes/error_feedback.h"
#include "schemes/recovery_floor.h"
#include "schemes/scheme_base.h"

namespace sketchps {

// The sketch fields both methods' configs share (YAML keys rows, cols_factor, cols, p2, keep, table).
struct SketchSizing {
  // Which entries of the exact second phase form G_t: the k largest exact sums ("top_k"), or every
  // candidate ("candidates": the values were sent anyway; only the downlink grows, to 8K bytes).
  enum class Keep { kTopK, kCandidates };
  // The precision of the sketch table on the wire: "f32", or "f16" (each cell rounded to binary16
  // before it is sent; the candidates may change, the exact second phase does not).
  enum class Table { kF32, kF16 };

  // Defaults (docs/methods.md "Sketch sizing", measured with `sketchps bench --input` on the default
  // job's gradients): c = 4k columns and K = 8k candidates, all kept. A sketch of c = 10k, as CSVec
  // users size it, is half a shard of the CNN: no compression at density 0.01.
  std::uint32_t rows = 5;    // r, in [1, 64]; odd recommended (even: lower median)
  double cols_factor = 4.0;  // c = ceil(cols_factor * k) when cols == 0; > 0
  std::uint64_t cols = 0;    // explicit c (0: use cols_factor); rows * cols <= 2^28
  std::uint32_t p2 = 8;      // candidates per kept entry, in [0, 1024]; 0: one phase, estimates
  Keep keep = Keep::kCandidates;
  Table table = Table::kF16;
  // The recovery floor (schemes/recovery_floor.h, docs/methods.md "No silent divergence"); off by default.
  double budget_factor = 1.0;       // uplink bytes a round may spend, x the sizing above's; >= 1, <= 1024
  double recovery_floor = 0.0;      // candidates' share of the range to start from, in [0, 1]; 0: none
  std::uint64_t adapt_window = 20;  // compressed rounds per window of the growth test, >= 1

  // Errors name the key: "<prefix>.rows: ...".
  absl::Status Validate(const std::string& prefix) const;
  // Capability (schemes/registry.h): why a worker joining mid-job cannot take part, "" when it can,
  // naming the key under `section`. The adaptive candidates (budget_factor > 1 or recovery_floor > 0)
  // grow from every round's G_t, which a joiner has not seen.
  std::string ElasticRefusal(const ConfigReader& section) const;
  // Reads rows, cols_factor, cols, p2, keep, table, budget_factor, recovery_floor and adapt_window (no
  // Finish, no Validate: the config's Read does both).
  absl::Status ReadFields(ConfigReader& section);
  // Sets `table` from its key's value ("f32" or "f16"); the error names the key under `section`.
  absl::Status SetTable(const ConfigReader& section, const std::string& name);
  // The number of columns for a range of `dim` entries that keeps k: `cols` as given, else
  // ceil(cols_factor * k) clamped so that the table fits the wire (kSketchCellsPerElement * dim cells).
  std::uint32_t ColsFor(std::uint64_t k, std::uint64_t dim) const;
};

// The entries a sketch exchange keeps for a range of `dim` entries asked to keep k: min(k, dim), at least 1
// (SketchExchange::k(); also the candidates' count from p2 x k).
std::uint64_t SketchKeep(std::uint64_t k, std::uint64_t dim);

class SketchExchange {
 public:
  SketchExchange(const SchemeContext& ctx, const SketchSizing& sizing);

  // OK, or why the hash could not be built (e.g. dim >= 2^32); schemes return it from Accumulate.
  const absl::Status& status() const { return status_; }
  // status(), or why the table cannot travel: more than kSketchCellsPerElement cells per entry of the
  // range, which the decoders refuse (an explicit `cols`; derived sizes are clamped to fit).
  absl::Status wire_status() const;
  // When the candidates (or, without a second phase, the kept entries) are fewer than 1% of the
  // range: the sketch methods diverged there (docs/reports/results.md "Why the sketches diverge").
  std::string advisory() const;
  std::uint32_t phases() const { return sizing_.p2 == 0 ? 1 : 2; }
  PhaseSpec Spec(std::uint32_t phase) const;
  std::uint64_t k() const { return k_; }
  // K of the next round (the recovery floor's controller: the configured min(p2 k, d) when it is off).
  std::uint64_t candidates() const { return floor_.candidates(); }
  const CandidateController& floor() const { return floor_; }

  // After every compressed round, skipped or not, with its G_t (identical on every worker): feeds the
  // recovery floor and logs what changed. Returns true when a window ended with the floor not held (the
  // budget cannot hold it; logged with kFloorNotHeldTag): the scheme reports it in its diagnostics.
  bool Observe(const Aggregate& g, std::uint64_t round, const char* scheme, std::uint32_t worker, std::uint32_t shard);
  void SaveFloor(SchemeState& state) const { floor_.Save(state, "floor"); }
  absl::Status RestoreFloor(const SchemeState& state, const char* scheme) {
    return floor_.Restore(state, "floor", scheme);
  }
  // The most entries G_t can have: k, or K with keep: candidates.
  std::uint64_t max_taken() const;
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
  CandidateController floor_;
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
