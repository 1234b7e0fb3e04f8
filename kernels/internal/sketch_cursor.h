// Internal to the Count Sketch kernels: hash families as types, input adapters and per-row cursors
// shared by accumulation and estimation (kernels/count_sketch.cc, kernels/sketch_estimate.h).
// Everything here runs on host and device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/count_sketch_hash.h"
#include "kernels/internal/policy.h"

namespace sketchps::kernels::internal {

using sketchps::CountSketchHash;

// Hash families as types, so that the family branch is taken once per call, not per entry.
// Row(h, j) evaluates any coordinate; a Walk(Row(h, j), i0) steps through i0, i0 + 1, ... (cheaper).
struct PolyFamily {
  using Walk = sketchps::CountSketchPolyWalk;
  SKETCHPS_HD static sketchps::CountSketchPolyRow Row(const CountSketchHash& h, std::uint32_t j) {
    return h.PolyRow(j);
  }
};
struct MixFamily {
  using Walk = sketchps::CountSketchMixWalk;
  SKETCHPS_HD static sketchps::CountSketchMixRow Row(const CountSketchHash& h, std::uint32_t j) { return h.MixRow(j); }
};

// Calls f(PolyFamily{}) or f(MixFamily{}) according to hash.family().
template <class F>
auto WithFamily(const CountSketchHash& hash, F&& f) {
  if (hash.family() == sketchps::CountSketchFamily::kSplitMix64) return f(MixFamily{});
  return f(PolyFamily{});
}

// Asks the CPU cache for *addr ahead of a read (no-op on CUDA).
SKETCHPS_HD inline void PrefetchRead(const float* addr) {
#if !SKETCHPS_KERNELS_CUDA
  __builtin_prefetch(addr);
#endif
}

// Input entries: entry t of a dense vector (coordinate t), or of (index, value) arrays.
struct DenseSource {
  const float* x;
  SKETCHPS_HD std::uint32_t Index(std::size_t t) const { return static_cast<std::uint32_t>(t); }
  SKETCHPS_HD float Value(std::size_t t) const { return x[t]; }
};
struct SparseSource {
  const std::uint32_t* idx;
  const float* val;
  SKETCHPS_HD std::uint32_t Index(std::size_t t) const { return idx[t]; }
  SKETCHPS_HD float Value(std::size_t t) const { return val[t]; }
};

// Coordinates to estimate: i = t (all of them) or i = idx[t].
struct AllIndices {
  SKETCHPS_HD std::uint32_t Index(std::size_t t) const { return static_cast<std::uint32_t>(t); }
};
struct ListedIndices {
  const std::uint32_t* idx;
  SKETCHPS_HD std::uint32_t Index(std::size_t t) const { return idx[t]; }
};

// Inputs whose entry t is coordinate t.
template <class Input>
struct Contiguous : std::false_type {};
template <>
struct Contiguous<DenseSource> : std::true_type {};
template <>
struct Contiguous<AllIndices> : std::true_type {};

// Row j's hashes at entries t = lo, lo + 1, ... of an input: walked for contiguous inputs
// (coordinate t) on the CPU, evaluated at in.Index(t) otherwise. Next() must follow each entry.
template <class Family, class Input, bool = Contiguous<Input>::value && !SKETCHPS_KERNELS_CUDA>
struct Cursor {
  typename Family::Walk walk;
  SKETCHPS_HD Cursor(const CountSketchHash& h, std::uint32_t j, const Input&, std::size_t lo)
      : walk(Family::Row(h, j), static_cast<std::uint32_t>(lo)) {}
  SKETCHPS_HD std::uint32_t Bucket(std::size_t) const { return walk.Bucket(); }
  SKETCHPS_HD bool Positive(std::size_t) const { return walk.Positive(); }
  SKETCHPS_HD void Next() { walk.Next(); }
};
template <class Family, class Input>
struct Cursor<Family, Input, false> {
  decltype(Family::Row(CountSketchHash(), 0)) row;
  Input in;
  SKETCHPS_HD Cursor(const CountSketchHash& h, std::uint32_t j, const Input& input, std::size_t)
      : row(Family::Row(h, j)), in(input) {}
  SKETCHPS_HD std::uint32_t Bucket(std::size_t t) const { return row.Bucket(in.Index(t)); }
  SKETCHPS_HD bool Positive(std::size_t t) const { return row.Positive(in.Index(t)); }
  SKETCHPS_HD void Next() {}
};

// est[t] = the lower median of vals[j·stride + t] over rows j, for t < m.
SKETCHPS_HD inline void StridedMedians(const float* vals, std::size_t stride, std::uint32_t rows, std::size_t m,
                                       float* est) {
  if (rows == 5) {  // the default: a constant row count lets the host compiler vectorize the loop
    for (std::size_t t = 0; t < m; ++t) est[t] = sketchps::CountSketchLowerMedian(vals + t, stride, 5);
    return;
  }
  for (std::size_t t = 0; t < m; ++t) est[t] = sketchps::CountSketchLowerMedian(vals + t, stride, rows);
}

}  // namespace sketchps::kernels::internal
