// Count Sketch kernels (see count_sketch.h). One Thrust source for the CPU (OpenMP) and CUDA backends.
//
// Accumulation, a backend strategy switch (#if SKETCHPS_KERNELS_CUDA): CUDA, walked runs of entries
// with 64-bit fixed-point atomics, deterministic (internal/sketch_cuda.h). CPU, one work item per OpenMP thread
// sketches its input slice into its own table (item 0 into the caller's, the others into scratch copies added
// afterwards in thread order; CAS-loop atomics cost several plain adds), rows outer, dense kPolynomial61 input hashed
// in SIMD lanes (internal/poly_lanes.h); for rows of 12 MiB or more each work item bins its updates by column range
// instead (internal/sketch_binning.h, sketch_bins.h: same additions, same order). Estimation and recovery:
// internal/sketch_estimate.h and internal/sketch_recover.h. Loops hash a batch first and then touch the table, so that
// many cache misses are in flight.
#include "kernels/count_sketch.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include <thrust/count.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/internal/pointer_check.h"
#include "kernels/internal/policy.h"
#include "kernels/internal/poly_lanes.h"
#include "kernels/internal/scratch_array.h"
#include "kernels/internal/sketch_binning.h"
#include "kernels/internal/sketch_bins.h"
#include "kernels/internal/sketch_cuda.h"
#include "kernels/internal/sketch_cursor.h"
#include "kernels/internal/sketch_estimate.h"
#include "kernels/internal/sketch_recover.h"

namespace sketchps::kernels {
namespace {

using internal::AllIndices;
using internal::BinPlan;
using internal::Cursor;
using internal::DenseSource;
using internal::ListedIndices;
using internal::Policy;
using internal::PolyFamily;
using internal::ScratchArray;
using internal::SketchBinning;
using internal::SparseSource;
using internal::StoreEstimates;
using internal::WithFamily;
using sketchps::CountSketchHash;
using sketchps::count_sketch_internal::ApplySign;

#if !SKETCHPS_KERNELS_CUDA  // the CPU strategy (CUDA: internal/sketch_cuda.h)
// *addr += v, atomically with respect to other AtomicAdd calls.
inline void AtomicAdd(float* addr, float v) {
  float expected;
  __atomic_load(addr, &expected, __ATOMIC_RELAXED);
  float desired = expected + v;
  while (!__atomic_compare_exchange(addr, &expected, &desired, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    desired = expected + v;
  }
}

// Entry t into every row with atomic adds (when private copies do not pay).
template <class Family, class Source>
struct AtomicAccumulate {
  Source src;
  float* table;
  CountSketchHash hash;
  SKETCHPS_HD void operator()(std::size_t t) const {
    const float v = src.Value(t);
    if (v == 0.0f) return;
    const std::uint32_t i = src.Index(t);
    for (std::uint32_t j = 0; j < hash.rows(); ++j) {
      const auto h = Family::Row(hash, j);
      AtomicAdd(&table[j * std::size_t{hash.cols()} + h.Bucket(i)], h.Signed(i, v));
    }
  }
};

using internal::BinRecord;

constexpr std::size_t kChunk = std::size_t{1} << 20;         // entries per rows-outer sweep (4 MiB, in LLC)
constexpr std::size_t kBatch = 256;                          // entries hashed before their adds
constexpr std::size_t kCopyRatio = 2;                        // copies if copy cells <= 2·entries·rows
constexpr std::size_t kMaxCopyBytes = std::size_t{1} << 29;  // and at most 512 MiB of copies

// Work item `part` of `parts`: its slice of the entries into its own table, binned when plan.bins > 0
// (internal/sketch_bins.h; the same additions per cell in the same order).
template <class Family, class Source>
struct SliceAccumulate {
  Source src;
  std::size_t count;
  std::size_t parts;
  float* table;   // item 0 adds here
  float* copies;  // item p > 0 zeroes copies[(p − 1)·cells, p·cells) and adds there
  CountSketchHash hash;
  BinPlan plan;
  BinRecord* lists;     // plan.bins > 0: bins·capacity records per item
  std::uint32_t* fill;  // and PaddedCounters(bins) counters per item
  SKETCHPS_HD void operator()(std::size_t part) const {
    float* out = table;
    if (part > 0) {
      out = copies + (part - 1) * hash.cells();
      for (std::size_t c = 0; c < hash.cells(); ++c) out[c] = 0.0f;
    }
    const std::size_t lo = count * part / parts;
    const std::size_t hi = count * (part + 1) / parts;
    if (plan.bins > 0) {
      internal::BinnedAccumulate<Family>(src, lo, hi, kChunk, hash, plan, out, lists + part * plan.bins * plan.capacity,
                                         fill + part * internal::PaddedCounters(plan.bins));
      return;
    }
    for (std::size_t base = lo; base < hi; base += kChunk) {
      const std::size_t end = base + kChunk < hi ? base + kChunk : hi;
      for (std::uint32_t j = 0; j < hash.rows(); ++j) {
        Sweep(j, base, end, out + j * std::size_t{hash.cols()});
      }
    }
  }
  SKETCHPS_HD void Sweep(std::uint32_t j, std::size_t base, std::size_t end, float* row) const {
    if constexpr (std::is_same_v<Family, PolyFamily> && std::is_same_v<Source, DenseSource>) {
      internal::PolyLanesAccumulate(hash.PolyRow(j), src.x, base, end, row);  // SIMD hashing
      return;
    }
    std::uint32_t bucket[kBatch];
    float signed_value[kBatch];
    Cursor<Family, Source> cursor(hash, j, src, base);
    for (std::size_t lo = base; lo < end; lo += kBatch) {
      const std::size_t hi = lo + kBatch < end ? lo + kBatch : end;
      std::size_t m = 0;
      for (std::size_t t = lo; t < hi; ++t, cursor.Next()) {
        const float v = src.Value(t);
        if (v == 0.0f) continue;
        bucket[m] = cursor.Bucket(t);
        __builtin_prefetch(row + bucket[m], 1);  // for the add below
        signed_value[m++] = ApplySign(cursor.Positive(t), v);
      }
      for (std::size_t q = 0; q < m; ++q) row[bucket[q]] += signed_value[q];
    }
  }
};

// table[c] += copies[0][c] + copies[1][c] + ..., in copy order.
struct AddCopies {
  float* table;
  const float* copies;
  std::size_t cells;
  std::size_t ncopies;
  SKETCHPS_HD void operator()(std::size_t c) const {
    float s = table[c];
    for (std::size_t p = 0; p < ncopies; ++p) s += copies[p * cells + c];
    table[c] = s;
  }
};
#endif  // !SKETCHPS_KERNELS_CUDA

// d_table += S(entries of src), with the backend's strategy (file comment).
template <class Family, class Source>
void Accumulate(Family, Source src, std::size_t count, const CountSketchHash& hash, float* d_table, const Exec& exec,
                [[maybe_unused]] const SketchBinning& binning) {
  if (count == 0) return;
#if SKETCHPS_KERNELS_CUDA
  if constexpr (std::is_same_v<Source, DenseSource>) {
    internal::AccumulateDenseCuda<Family>(src.x, count, hash, d_table, exec);
  } else {
    internal::AccumulateSparseCuda<Family>(src.idx, src.val, count, hash, d_table, exec);
  }
#else
  thrust::counting_iterator<std::size_t> first(0);
  std::size_t parts = static_cast<std::size_t>(std::max(1, BackendParallelism()));
  parts = std::min(parts, (count + kBatch - 1) / kBatch);
  const std::size_t copy_cells = (parts - 1) * hash.cells();
  if (copy_cells > kCopyRatio * count * hash.rows() || copy_cells * sizeof(float) > kMaxCopyBytes) {
    thrust::for_each(Policy(exec), first, first + count, AtomicAccumulate<Family, Source>{src, d_table, hash});
    return;
  }
  ScratchArray<float> copies(*exec.scratch, copy_cells);
  BinPlan plan = internal::PlanAccumulateBins(hash, count / parts, binning);
  const std::size_t list_bytes = parts * plan.bins * plan.capacity * sizeof(BinRecord);
  if (binning.mode == SketchBinning::Mode::kAuto && list_bytes > kMaxCopyBytes) plan = BinPlan{};  // as for copies
  ScratchArray<BinRecord> lists(*exec.scratch, parts * plan.bins * plan.capacity);
  ScratchArray<std::uint32_t> fill(*exec.scratch, parts * internal::PaddedCounters(plan.bins));
  thrust::for_each(Policy(exec), first, first + parts,
                   SliceAccumulate<Family, Source>{src, count, parts, d_table, copies.data(), hash, plan, lists.data(),
                                                   fill.data()});
  if (parts > 1) {
    thrust::for_each(Policy(exec), first, first + hash.cells(),
                     AddCopies{d_table, copies.data(), hash.cells(), parts - 1});
  }
#endif
}

struct AtLeast {
  std::uint64_t bound;
  SKETCHPS_HD bool operator()(std::uint32_t i) const { return i >= bound; }
};
// Sum of squares of row `row`, in double and in column order: products of floats are exact in
// double, so the result is the same on every backend (no dependence on FMA contraction).
struct RowSumSquares {
  const float* table;
  std::size_t cols;
  SKETCHPS_HD double operator()(std::size_t row) const {
    double s = 0.0;
    for (std::size_t c = 0; c < cols; ++c) s += static_cast<double>(table[row * cols + c]) * table[row * cols + c];
    return s;
  }
};

// The checks every table kernel makes; n (entries or coordinates) must not exceed the sketch dim.
absl::Status CheckCommon(const CountSketchHash& hash, const float* d_table, const Exec& exec, const char* fn,
                         std::size_t n = 0) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExec(fn, exec));
  if (hash.rows() == 0) return absl::InvalidArgumentError(absl::StrCat(fn, ": hash is empty (use Create)"));
  if (n > hash.dim()) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": n = ", n, " exceeds the sketch dim ", hash.dim()));
  }
  return internal::CheckDevicePointer(fn, "d_table", d_table, 1);
}

absl::Status CheckIndices(const std::uint32_t* d_idx, std::size_t count, const CountSketchHash& hash, const Exec& exec,
                          const char* fn) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(fn, "d_idx", d_idx, count));
  if (count == 0) return absl::OkStatus();
  const auto bad = thrust::count_if(Policy(exec), d_idx, d_idx + count, AtLeast{hash.dim()});
  if (bad != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(fn, ": ", bad, " entries of d_idx are not below the sketch dim ", hash.dim()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SketchAccumulate(const float* d_x, std::size_t n, const CountSketchHash& hash, float* d_table,
                              const Exec& exec) {
  return internal::SketchAccumulateWith(d_x, n, hash, d_table, exec, SketchBinning{});
}

absl::Status SketchAccumulateSparse(const std::uint32_t* d_idx, const float* d_val, std::size_t count,
                                    const CountSketchHash& hash, float* d_table, const Exec& exec) {
  return internal::SketchAccumulateSparseWith(d_idx, d_val, count, hash, d_table, exec, SketchBinning{});
}

absl::Status SketchMerge(float* d_dst, const float* d_src, std::size_t cells, const Exec& exec) {
  constexpr const char* kFn = "SketchMerge";
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_dst", d_dst, cells));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_src", d_src, cells));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExec(kFn, exec));
  if (cells == 0) return absl::OkStatus();
  thrust::transform(Policy(exec), d_dst, d_dst + cells, d_src, d_dst, thrust::plus<float>());
  return absl::OkStatus();
}

absl::Status SketchEstimate(const float* d_table, const CountSketchHash& hash, const std::uint32_t* d_idx,
                            std::size_t count, float* d_out, const Exec& exec) {
  constexpr const char* kFn = "SketchEstimate";
  SKETCHPS_RETURN_IF_ERROR(CheckCommon(hash, d_table, exec, kFn));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_out", d_out, count));
  SKETCHPS_RETURN_IF_ERROR(CheckIndices(d_idx, count, hash, exec, kFn));
  if (count > 0) internal::EstimateInto(ListedIndices{d_idx}, count, d_table, hash, StoreEstimates{d_out}, exec);
  return absl::OkStatus();
}

absl::Status SketchEstimateAll(const float* d_table, const CountSketchHash& hash, std::size_t n, float* d_est,
                               const Exec& exec) {
  return internal::SketchEstimateAllWith(d_table, hash, n, d_est, exec, SketchBinning{});
}

absl::StatusOr<std::size_t> SketchRecover(const float* d_table, const CountSketchHash& hash, std::size_t n,
                                          std::size_t k, std::uint32_t* d_out_idx, float* d_out_est, const Exec& exec) {
  return internal::SketchRecoverWith(d_table, hash, n, k, d_out_idx, d_out_est, exec, SketchBinning{});
}

absl::StatusOr<double> SketchL2Estimate(const float* d_table, std::uint32_t rows, std::uint32_t cols,
                                        const Exec& exec) {
  constexpr const char* kFn = "SketchL2Estimate";
  if (rows < 1 || rows > kMaxSketchRows || cols < 1) {
    return absl::InvalidArgumentError(absl::StrCat(kFn, ": need rows in [1, ", kMaxSketchRows,
                                                   "] and cols >= 1, got rows = ", rows, ", cols = ", cols));
  }
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_table", d_table, 1));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExec(kFn, exec));
  ScratchArray<double> row_sums(*exec.scratch, rows);
  thrust::counting_iterator<std::size_t> first(0);
  thrust::transform(Policy(exec), first, first + rows, row_sums.data(), RowSumSquares{d_table, cols});
  double sums[kMaxSketchRows];
  CopyToHost(sums, row_sums.data(), rows * sizeof(double));
  std::sort(sums, sums + rows);
  return std::sqrt(sums[(rows - 1) / 2]);
}

}  // namespace sketchps::kernels

namespace sketchps::kernels::internal {

absl::Status SketchAccumulateWith(const float* d_x, std::size_t n, const CountSketchHash& hash, float* d_table,
                                  const Exec& exec, const SketchBinning& binning) {
  constexpr const char* kFn = "SketchAccumulate";
  SKETCHPS_RETURN_IF_ERROR(CheckCommon(hash, d_table, exec, kFn, n));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_x", d_x, n));
  WithFamily(hash, [&](auto family) { Accumulate(family, DenseSource{d_x}, n, hash, d_table, exec, binning); });
  return absl::OkStatus();
}

absl::Status SketchAccumulateSparseWith(const std::uint32_t* d_idx, const float* d_val, std::size_t count,
                                        const CountSketchHash& hash, float* d_table, const Exec& exec,
                                        const SketchBinning& binning) {
  constexpr const char* kFn = "SketchAccumulateSparse";
  SKETCHPS_RETURN_IF_ERROR(CheckCommon(hash, d_table, exec, kFn));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_val", d_val, count));
  SKETCHPS_RETURN_IF_ERROR(CheckIndices(d_idx, count, hash, exec, kFn));
  WithFamily(hash, [&](auto family) {
    Accumulate(family, SparseSource{d_idx, d_val}, count, hash, d_table, exec, binning);
  });
  return absl::OkStatus();
}

absl::Status SketchEstimateAllWith(const float* d_table, const CountSketchHash& hash, std::size_t n, float* d_est,
                                   const Exec& exec, const SketchBinning& binning) {
  constexpr const char* kFn = "SketchEstimateAll";
  SKETCHPS_RETURN_IF_ERROR(CheckCommon(hash, d_table, exec, kFn, n));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_est", d_est, n));
  if (n > 0) EstimateInto(AllIndices{}, n, d_table, hash, StoreEstimates{d_est}, exec, binning);
  return absl::OkStatus();
}

absl::StatusOr<std::size_t> SketchRecoverWith(const float* d_table, const CountSketchHash& hash, std::size_t n,
                                              std::size_t k, std::uint32_t* d_out_idx, float* d_out_est,
                                              const Exec& exec, const SketchBinning& binning) {
  constexpr const char* kFn = "SketchRecover";
  SKETCHPS_RETURN_IF_ERROR(CheckCommon(hash, d_table, exec, kFn, n));
  k = std::min(k, n);
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_out_idx", d_out_idx, k));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_out_est", d_out_est, k));
  if (k == 0) return std::size_t{0};
  return RecoverTopK(d_table, hash, n, k, d_out_idx, d_out_est, exec, binning);
}

}  // namespace sketchps::kernels::internal
