// Internal to the Count Sketch kernels: how the CPU backend orders its table accesses once the table
// no longer fits in the L2 cache, and entry points that choose the order explicitly (tests use them
// to compare both orders bit for bit). Free of Thrust, so tests may include it.
//
// Why: every entry touches one random cell per row. While the cells touched fit in L2 (2 MiB per
// core on the bench machine) an access costs about 1 ns; beyond it an access goes to the
// last-level cache, and with ~16 misses in flight per core it costs 2.5–5 ns, so the kernels grew
// faster than d. Two large-table orders (docs/reports/benchmarks.md has the measurements behind them):
//   estimate    rows outer: a work item covers `item` coordinates (2^18 by default) and reads one
//               row at a time for all of them into an item-sized array, instead of all rows for
//               every 256 coordinates; the medians follow. The random reads then hit one row
//               instead of the whole table (2× faster at 5 × 1M columns, 1.5× at 5 × 256K).
//   accumulate  binning: each work item sweeps a chunk of entries once per row and appends
//               (column, signed value) to the list of the column's bin (2^shift columns); a full
//               list, and every list at the end of the chunk's row, is added to its bin in entry
//               order. A bin is 128 KiB of a row and its list holds 16 records per line of it, so
//               the bin is loaded once per list and then hit in L2. The appends cost about as much
//               as the misses they save until a row is well beyond L2: measured slower than the
//               direct loop at 1M and 2M columns, faster at 4M, so kAuto bins from kBinMinCols.
//               (The direct loop already sweeps a chunk once per row, so half a 4 MiB row hits L2.)
// Order: a cell belongs to exactly one bin and a bin's records are added in entry order, so every
// cell receives the same float additions in the same order as in the direct loop (the same slice
// partition, hence the same thread count): binned tables equal direct ones bit for bit, zero
// entries included (skipped or added exactly as the direct loop does). Estimates are exact in
// either order.
//
// The CUDA backend ignores all of this (atomics, one coordinate per thread).
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/count_sketch_hash.h"
#include "kernels/backend.h"

namespace sketchps::kernels::internal {

struct SketchBinning {
  enum class Mode { kAuto, kOff, kOn };
  Mode mode = Mode::kAuto;          // kAuto: the large-table order when the table is beyond L2
  std::uint32_t bin_cols_log2 = 0;  // accumulate: columns per bin as a power of two; 0: kBinColsLog2
  std::uint32_t item_log2 = 0;      // estimate: coordinates per item as a power of two; 0: kRowsOuterItemLog2
};

constexpr std::uint32_t kBinColsLog2 = 15;              // 32K columns: 128 KiB of a row per bin
constexpr std::size_t kBinReuse = 16;                   // list records per 64-byte line of a bin
constexpr std::uint32_t kBinMinCols = 3u << 20;         // kAuto binning: rows of at least 12 MiB
constexpr std::uint32_t kRowsOuterItemLog2 = 18;        // at most 256K coordinates per item,
constexpr std::size_t kRowsOuterMaxValues = 1u << 21;   // and at most 8 MiB of values (rows·item)
constexpr std::uint64_t kRowsOuterMinCells = 1u << 19;  // kAuto rows outer: tables of at least 2 MiB
constexpr std::size_t kRowsOuterMinCount = 1u << 16;    // and at least 64K coordinates

// The accumulation plan; bins == 0 means the direct loop.
struct BinPlan {
  std::uint32_t shift = 0;   // the bin of column c is c >> shift
  std::uint32_t bins = 0;    // ceil(cols / 2^shift)
  std::size_t capacity = 0;  // records per bin list
};

// Counters per work item, padded to whole 128-byte blocks: work items on different threads must not
// share the cache lines they increment.
inline std::size_t PaddedCounters(std::size_t counters) { return (counters + 31) / 32 * 32; }

// Accumulation of `entries_per_part` entries per work item: binned (kAuto) when a row is at least
// kBinMinCols wide and a work item has at least as many entries as a row has columns.
inline BinPlan PlanAccumulateBins(const CountSketchHash& hash, std::size_t entries_per_part,
                                  const SketchBinning& binning) {
  using Mode = SketchBinning::Mode;
  if (binning.mode == Mode::kOff) return {};
  if (binning.mode == Mode::kAuto && (hash.cols() < kBinMinCols || entries_per_part < hash.cols())) return {};
  BinPlan plan;
  plan.shift = binning.bin_cols_log2 != 0 ? binning.bin_cols_log2 : kBinColsLog2;
  plan.bins = static_cast<std::uint32_t>(((std::uint64_t{hash.cols()} - 1) >> plan.shift) + 1);
  plan.capacity = ((std::size_t{1} << plan.shift) + 15) / 16 * kBinReuse;
  return plan;
}

// Coordinates per rows-outer estimation item for `count` coordinates, or 0 for the direct order
// (kAuto: rows outer for tables of at least kRowsOuterMinCells and kRowsOuterMinCount coordinates).
// Default items: the largest power of two <= 2^kRowsOuterItemLog2 with rows·item <=
// kRowsOuterMaxValues (at least 4096).
inline std::size_t PlanRowsOuterItem(const CountSketchHash& hash, std::size_t count, const SketchBinning& binning) {
  using Mode = SketchBinning::Mode;
  if (binning.mode == Mode::kOff) return 0;
  if (binning.mode == Mode::kAuto && (hash.cells() < kRowsOuterMinCells || count < kRowsOuterMinCount)) return 0;
  if (binning.item_log2 != 0) return std::size_t{1} << binning.item_log2;
  std::size_t item = std::size_t{1} << kRowsOuterItemLog2;
  while (item > 4096 && item * hash.rows() > kRowsOuterMaxValues) item /= 2;
  return item;
}

// kernels::SketchAccumulate, SketchAccumulateSparse, SketchEstimateAll and SketchRecover (same
// contracts, kernels/count_sketch.h) with the access order given instead of kAuto.
absl::Status SketchAccumulateWith(const float* d_x, std::size_t n, const sketchps::CountSketchHash& hash,
                                  float* d_table, const Exec& exec, const SketchBinning& binning);
absl::Status SketchAccumulateSparseWith(const std::uint32_t* d_idx, const float* d_val, std::size_t count,
                                        const sketchps::CountSketchHash& hash, float* d_table, const Exec& exec,
                                        const SketchBinning& binning);
absl::Status SketchEstimateAllWith(const float* d_table, const sketchps::CountSketchHash& hash, std::size_t n,
                                   float* d_est, const Exec& exec, const SketchBinning& binning);
absl::StatusOr<std::size_t> SketchRecoverWith(const float* d_table, const sketchps::CountSketchHash& hash,
                                              std::size_t n, std::size_t k, std::uint32_t* d_out_idx, float* d_out_est,
                                              const Exec& exec, const SketchBinning& binning);

}  // namespace sketchps::kernels::internal
