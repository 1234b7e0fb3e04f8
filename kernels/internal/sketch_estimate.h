// Internal to the Count Sketch kernels: estimation of many coordinates, with the estimates handed to
// a sink instead of always being stored, so that recovery can keep only its candidates.
//
// Work item `item` covers coordinates t in [item·kEstimateItem, (item + 1)·kEstimateItem) ∩ [0, count)
// of an index list (AllIndices: coordinate t itself). It estimates them kEstimateBlock at a time
// (every row's signed cells, then one median per coordinate) and calls
//   sink(item, t0, est, m)   with est[0..m) the estimates of entries t0, t0 + 1, ..., t0 + m − 1,
// in increasing t0. CUDA: one coordinate per item, except that storing the estimates of all
// coordinates walks runs of them (internal/sketch_cuda.h). CPU: 64K coordinates per item, and for the
// kPolynomial61 family over all coordinates the rows are hashed by interleaved SIMD walks
// (internal/poly_lanes.h) that carry their state from block to block. CPU, all coordinates of a
// table beyond L2: rows outer (internal/sketch_binning.h), items of EstimateItemSize coordinates,
// each row's cells read for the whole item into an item-sized array before the medians.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include "kernels/internal/poly_lanes.h"
#include "kernels/internal/scratch_array.h"
#include "kernels/internal/sketch_binning.h"
#include "kernels/internal/sketch_bins.h"
#include "kernels/internal/sketch_cuda.h"
#include "kernels/internal/sketch_cursor.h"

namespace sketchps::kernels::internal {

#if SKETCHPS_KERNELS_CUDA
constexpr std::size_t kEstimateBlock = 1;
constexpr std::size_t kEstimateItem = 1;
#else
constexpr std::size_t kEstimateBlock = 256;
constexpr std::size_t kEstimateItem = std::size_t{1} << 16;
#endif

// The lower median of vals[j·kEstimateBlock + t] over rows j, for t < m.
SKETCHPS_HD inline void BlockMedians(const float* vals, std::uint32_t rows, std::size_t m, float* est) {
  StridedMedians(vals, kEstimateBlock, rows, m, est);
}

template <class Family, class Indices, class Sink>
struct EstimateItems {
  Indices index;
  std::size_t count;
  const float* table;
  CountSketchHash hash;
  Sink sink;

  SKETCHPS_HD void operator()(std::size_t item) const {
    const std::size_t lo = item * kEstimateItem;
    const std::size_t hi = count - lo < kEstimateItem ? count : lo + kEstimateItem;
#if !SKETCHPS_KERNELS_CUDA
    if constexpr (std::is_same_v<Family, PolyFamily> && std::is_same_v<Indices, AllIndices>) {
      return LaneItem(item, lo, hi);
    }
#endif
    float vals[kMaxSketchRows * kEstimateBlock];
    float est[kEstimateBlock];
    for (std::size_t t0 = lo; t0 < hi; t0 += kEstimateBlock) {
      const std::size_t m = hi - t0 < kEstimateBlock ? hi - t0 : kEstimateBlock;
      for (std::uint32_t j = 0; j < hash.rows(); ++j) CursorBlock(j, t0, m, vals + j * kEstimateBlock);
      BlockMedians(vals, hash.rows(), m, est);
      sink(item, t0, est, m);
    }
  }

  // out[t] = s_j·T[j][h_j] of entry t0 + t, t < m: hash the block first, so that the reads overlap.
  SKETCHPS_HD void CursorBlock(std::uint32_t j, std::size_t t0, std::size_t m, float* out) const {
    const float* row = table + j * std::size_t{hash.cols()};
    std::uint32_t bucket[kEstimateBlock];
    bool positive[kEstimateBlock];
    Cursor<Family, Indices> cursor(hash, j, index, t0);
    for (std::size_t t = 0; t < m; ++t, cursor.Next()) {
      bucket[t] = cursor.Bucket(t0 + t);
      positive[t] = cursor.Positive(t0 + t);
      PrefetchRead(row + bucket[t]);
    }
    for (std::size_t t = 0; t < m; ++t) out[t] = count_sketch_internal::ApplySign(positive[t], row[bucket[t]]);
  }

#if !SKETCHPS_KERNELS_CUDA
  // The kPolynomial61 item over coordinates [lo, hi): one set of lanes per row, walked block by block.
  // Lanes past hi hash coordinates that are never read (their buckets stay in [0, cols)).
  void LaneItem(std::size_t item, std::size_t lo, std::size_t hi) const {
    static_assert(kEstimateBlock % kPolyLanes == 0, "a block is a whole number of lane steps");
    PolyLanes lanes[kMaxSketchRows];
    for (std::uint32_t j = 0; j < hash.rows(); ++j)
      lanes[j] = StartPolyLanes(hash.PolyRow(j), static_cast<std::uint32_t>(lo));
    float vals[kMaxSketchRows * kEstimateBlock];
    float est[kEstimateBlock];
    std::uint32_t bucket[kEstimateBlock];
    std::uint32_t sign_bit[kEstimateBlock];
    for (std::size_t t0 = lo; t0 < hi; t0 += kEstimateBlock) {
      const std::size_t m = hi - t0 < kEstimateBlock ? hi - t0 : kEstimateBlock;
      for (std::uint32_t j = 0; j < hash.rows(); ++j) {
        WalkPolyLanes(lanes[j], (m + kPolyLanes - 1) / kPolyLanes, bucket, sign_bit);
        const float* row = table + j * std::size_t{hash.cols()};
        float* out = vals + j * kEstimateBlock;
        for (std::size_t t = 0; t < m; ++t) out[t] = FlipSign(row[bucket[t]], sign_bit[t]);
      }
      BlockMedians(vals, hash.rows(), m, est);
      sink(item, t0, est, m);
    }
  }
#endif
};

// Sink: stores every estimate, out[t] for entry t.
struct StoreEstimates {
  float* out;
  SKETCHPS_HD void operator()(std::size_t, std::size_t t0, const float* est, std::size_t m) const {
    for (std::size_t t = 0; t < m; ++t) out[t0 + t] = est[t];
  }
};

// Sink: keeps the entries with |estimate| >= tau in the item's `capacity` slots, in entry order:
// idx/val[item·capacity + q] for q < min(counts[item], capacity). counts[item] (zeroed beforehand)
// ends as the number that qualified, which may exceed capacity (the excess is dropped).
struct KeepAtLeast {
  float tau;
  std::size_t capacity;
  std::uint32_t* idx;
  float* val;
  std::uint32_t* counts;
  SKETCHPS_HD void operator()(std::size_t item, std::size_t t0, const float* est, std::size_t m) const {
    float most = 0.0f;  // a vectorizable max first: most blocks hold no candidate (NaN never qualifies)
    for (std::size_t t = 0; t < m; ++t) {
      const float a = fabsf(est[t]);
      most = a > most ? a : most;
    }
    if (!(most >= tau)) return;
    std::uint32_t c = counts[item];
    for (std::size_t t = 0; t < m; ++t) {
      if (!(fabsf(est[t]) >= tau)) continue;
      if (c < capacity) {
        idx[item * capacity + c] = static_cast<std::uint32_t>(t0 + t);
        val[item * capacity + c] = est[t];
      }
      ++c;
    }
    counts[item] = c;
  }
};

// Coordinates per work item when EstimateInto covers all of [0, count) (AllIndices) with `binning`;
// kEstimateItem for listed indices.
inline std::size_t EstimateItemSize(const CountSketchHash& hash, std::size_t count, const SketchBinning& binning) {
#if SKETCHPS_KERNELS_CUDA
  return kEstimateItem;
#else
  const std::size_t item = PlanRowsOuterItem(hash, count, binning);
  return item > 0 ? item : kEstimateItem;
#endif
}

// Number of work items for `count` entries.
inline std::size_t EstimateItemCount(std::size_t count, std::size_t item = kEstimateItem) {
  return (count + item - 1) / item;
}

#if !SKETCHPS_KERNELS_CUDA
// The rows-outer estimation (internal/sketch_bins.h) over items of `item` coordinates, one Thrust
// work item per thread.
template <class Family, class Sink>
void RunRowsOuterEstimate(std::size_t count, std::size_t item, const float* d_table, const CountSketchHash& hash,
                          Sink sink, const Exec& exec) {
  const std::size_t items = EstimateItemCount(count, item);
  std::size_t parts = static_cast<std::size_t>(BackendParallelism() > 1 ? BackendParallelism() : 1);
  parts = parts < items ? parts : items;
  ScratchArray<float> vals(*exec.scratch, parts * hash.rows() * item);
  thrust::counting_iterator<std::size_t> first(0);
  using Functor = RowsOuterEstimate<Family, Sink, kEstimateBlock>;
  thrust::for_each(Policy(exec), first, first + parts, Functor{count, parts, item, d_table, hash, sink, vals.data()});
}
#endif

// Runs every work item of the estimation of index(t), t < count, with the given sink: rows outer
// over EstimateItemSize(hash, count, binning) coordinates per item when that plans it (CPU,
// AllIndices), else EstimateItems over kEstimateItem.
template <class Indices, class Sink>
void EstimateInto(Indices index, std::size_t count, const float* d_table, const CountSketchHash& hash, Sink sink,
                  const Exec& exec, const SketchBinning& binning = {}) {
#if SKETCHPS_KERNELS_CUDA
  if constexpr (std::is_same_v<Indices, AllIndices> && std::is_same_v<Sink, StoreEstimates>) {
    if (EstimateRuns(d_table, hash, count, StoreAt{sink.out}, exec)) return;  // walked (sketch_cuda.h)
  }
#endif
  thrust::counting_iterator<std::size_t> first(0);
  WithFamily(hash, [&](auto family) {
#if !SKETCHPS_KERNELS_CUDA
    if constexpr (std::is_same_v<Indices, AllIndices>) {
      const std::size_t item = PlanRowsOuterItem(hash, count, binning);
      if (item > 0) return RunRowsOuterEstimate<decltype(family)>(count, item, d_table, hash, sink, exec);
    }
#endif
    using Functor = EstimateItems<decltype(family), Indices, Sink>;
    thrust::for_each(Policy(exec), first, first + EstimateItemCount(count), Functor{index, count, d_table, hash, sink});
  });
}

}  // namespace sketchps::kernels::internal
