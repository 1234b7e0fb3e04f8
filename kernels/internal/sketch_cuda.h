// Internal, CUDA backend only: the Count Sketch's device kernels (kernels/count_sketch.cc and
// kernels/sketch_recover.cc call them; the CPU backend has its own loops in sketch_bins.h).
//
// Hashing: a thread takes a run of kRun consecutive coordinates and walks each row over it
// (CountSketchPolyWalk: additions after one start-up, instead of five 64x64-bit products per
// coordinate and row); listed coordinates and kSplitMix64 evaluate the row per coordinate.
//
// Accumulation is deterministic: every signed value is turned into a 64-bit fixed-point integer
// (scale 2^e, with e the largest exponent for which the sum of all magnitudes stays below 2^62) and
// added with an integer atomic, so a cell's sum does not depend on the order of the additions; the
// integer table is then added to the float table once per cell. A value is off by at most
// 2^-e / 2 = Σ|x| · 2^-63 (a float atomic sum would be off by about 2^-24 of the cell's partial
// sums), and integer-valued inputs of moderate size are exact. Inputs are expected finite; with a
// non-finite one the table becomes non-finite (float atomics, as the CPU loops would).
//
// Estimation of all coordinates walks every row of a run, then takes the medians; recovery keeps
// the estimates at or above a threshold through an atomic counter (in any order) and sorts them by
// (|estimate| descending, index ascending), which makes its result deterministic.
#pragma once

#include "kernels/internal/policy.h"

#if SKETCHPS_KERNELS_CUDA
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "common/count_sketch_hash.h"
#include "kernels/internal/device_reduce.h"
#include "kernels/internal/scratch_array.h"
#include "kernels/internal/sketch_cursor.h"

namespace sketchps::kernels::internal {

constexpr unsigned kRun = 16;         // coordinates per thread when walking
constexpr unsigned kWalkMaxRows = 8;  // walked estimation holds this many rows per thread
constexpr int kSketchThreads = 256;

inline int Blocks(std::size_t threads) { return static_cast<int>((threads + kSketchThreads - 1) / kSketchThreads); }

// Row j's bucket and sign of coordinates start, start + 1, ..., one call per coordinate.
template <class Family>
struct RowWalk;
template <>
struct RowWalk<PolyFamily> {
  sketchps::CountSketchPolyWalk walk;
  __device__ RowWalk(const CountSketchHash& h, std::uint32_t j, std::uint32_t start) : walk(h.PolyRow(j), start) {}
  __device__ void Next(std::uint32_t& bucket, bool& positive) {
    bucket = walk.Bucket();
    positive = walk.Positive();
    walk.Next();
  }
};
template <>
struct RowWalk<MixFamily> {
  sketchps::CountSketchMixRow row;
  std::uint32_t i;
  __device__ RowWalk(const CountSketchHash& h, std::uint32_t j, std::uint32_t start) : row(h.MixRow(j)), i(start) {}
  __device__ void Next(std::uint32_t& bucket, bool& positive) {
    bucket = row.Bucket(i);
    positive = row.Positive(i);
    ++i;
  }
};

__device__ inline long long ToFixed(float signed_value, double scale) {
  return __double2ll_rn(static_cast<double>(signed_value) * scale);
}

// Dense input: thread t adds entries [t·kRun, (t+1)·kRun) ∩ [0, n) to every row.
template <class Family>
__global__ void AccumulateDenseKernel(const float* x, std::size_t n, CountSketchHash hash, double scale,
                                      unsigned long long* acc) {
  const std::size_t start = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kRun;
  if (start >= n) return;
  const unsigned m = n - start < kRun ? static_cast<unsigned>(n - start) : kRun;
  float v[kRun];
  bool any = false;
  for (unsigned q = 0; q < kRun; ++q) {
    v[q] = q < m ? x[start + q] : 0.0f;
    any |= v[q] != 0.0f;
  }
  if (!any) return;
  for (std::uint32_t j = 0; j < hash.rows(); ++j) {
    unsigned long long* row = acc + std::size_t{j} * hash.cols();
    RowWalk<Family> walk(hash, j, static_cast<std::uint32_t>(start));
    for (unsigned q = 0; q < m; ++q) {
      std::uint32_t bucket;
      bool positive;
      walk.Next(bucket, positive);
      if (v[q] == 0.0f) continue;
      const long long f = ToFixed(count_sketch_internal::ApplySign(positive, v[q]), scale);
      atomicAdd(row + bucket, static_cast<unsigned long long>(f));
    }
  }
}

// Sparse input: thread t adds entry t (coordinate idx[t]) to every row.
template <class Family>
__global__ void AccumulateSparseKernel(const std::uint32_t* idx, const float* val, std::size_t count,
                                       CountSketchHash hash, double scale, unsigned long long* acc) {
  const std::size_t t = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= count || val[t] == 0.0f) return;
  const std::uint32_t i = idx[t];
  for (std::uint32_t j = 0; j < hash.rows(); ++j) {
    const auto row = Family::Row(hash, j);
    const long long f = ToFixed(row.Signed(i, val[t]), scale);
    atomicAdd(acc + std::size_t{j} * hash.cols() + row.Bucket(i), static_cast<unsigned long long>(f));
  }
}

// The fallback for non-finite inputs: float atomics (the table becomes non-finite either way).
template <class Family, class Source>
__global__ void AccumulateFloatKernel(Source src, std::size_t count, CountSketchHash hash, float* table) {
  const std::size_t t = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= count) return;
  const float v = src.Value(t);
  if (v == 0.0f) return;
  const std::uint32_t i = src.Index(t);
  for (std::uint32_t j = 0; j < hash.rows(); ++j) {
    const auto row = Family::Row(hash, j);
    atomicAdd(table + std::size_t{j} * hash.cols() + row.Bucket(i), row.Signed(i, v));
  }
}

template <class Cell = unsigned long long>  // a template: this header is included by several files
__global__ void AddFixedKernel(const Cell* acc, std::size_t cells, double inv_scale, float* table) {
  const std::size_t c = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cells) return;
  const auto sum = static_cast<long long>(acc[c]);
  if (sum != 0) table[c] += static_cast<float>(static_cast<double>(sum) * inv_scale);
}

// The fixed-point scale for values whose magnitudes sum to `total`: 2^e with total·2^e < 2^62 (e at
// most 960, so that the scale stays finite for sums of subnormal magnitudes).
inline double FixedScale(double total) {
  int exponent = 0;
  std::frexp(total * (1.0 + 1e-9), &exponent);  // total < 2^exponent
  return std::ldexp(1.0, 62 - exponent < 960 ? 62 - exponent : 960);
}

// d_table += S(entries), deterministically (file comment). `magnitudes` is Σ|value| of the entries.
template <class Family, class Launch, class Fallback>
void AccumulateFixed(double magnitudes, const CountSketchHash& hash, float* d_table, const Exec& exec, Launch launch,
                     Fallback fallback) {
  if (magnitudes == 0.0) return;
  const auto stream = static_cast<cudaStream_t>(exec.stream);
  if (!std::isfinite(magnitudes)) {
    fallback(stream);
    CudaCheck(cudaGetLastError(), "sketch accumulate launch");
    return;
  }
  const double scale = FixedScale(magnitudes);
  ScratchArray<unsigned long long> acc(*exec.scratch, hash.cells());
  CudaCheck(cudaMemsetAsync(acc.data(), 0, hash.cells() * sizeof(unsigned long long), stream), "sketch zero");
  launch(scale, acc.data(), stream);
  CudaCheck(cudaGetLastError(), "sketch accumulate launch");
  AddFixedKernel<<<Blocks(hash.cells()), kSketchThreads, 0, stream>>>(acc.data(), hash.cells(), 1.0 / scale, d_table);
  CudaCheck(cudaGetLastError(), "sketch accumulate launch");
}

template <class Family>
void AccumulateDenseCuda(const float* d_x, std::size_t n, const CountSketchHash& hash, float* d_table,
                         const Exec& exec) {
  const double magnitudes = DeviceSumFloats(d_x, n, AbsTerm{}, exec);
  AccumulateFixed<Family>(
      magnitudes, hash, d_table, exec,
      [&](double scale, unsigned long long* acc, cudaStream_t stream) {
        AccumulateDenseKernel<Family>
            <<<Blocks((n + kRun - 1) / kRun), kSketchThreads, 0, stream>>>(d_x, n, hash, scale, acc);
      },
      [&](cudaStream_t stream) {
        AccumulateFloatKernel<Family><<<Blocks(n), kSketchThreads, 0, stream>>>(DenseSource{d_x}, n, hash, d_table);
      });
}

template <class Family>
void AccumulateSparseCuda(const std::uint32_t* d_idx, const float* d_val, std::size_t count,
                          const CountSketchHash& hash, float* d_table, const Exec& exec) {
  const double magnitudes = DeviceSumFloats(d_val, count, AbsTerm{}, exec);
  AccumulateFixed<Family>(
      magnitudes, hash, d_table, exec,
      [&](double scale, unsigned long long* acc, cudaStream_t stream) {
        AccumulateSparseKernel<Family>
            <<<Blocks(count), kSketchThreads, 0, stream>>>(d_idx, d_val, count, hash, scale, acc);
      },
      [&](cudaStream_t stream) {
        AccumulateFloatKernel<Family>
            <<<Blocks(count), kSketchThreads, 0, stream>>>(SparseSource{d_idx, d_val}, count, hash, d_table);
      });
}

// Estimates of coordinates [0, n) by walked runs (hash.rows() <= kWalkMaxRows), each handed to
// sink(i, estimate).
template <class Family, class Sink>
__global__ void EstimateRunsKernel(const float* table, std::size_t n, CountSketchHash hash, Sink sink) {
  const std::size_t start = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kRun;
  if (start >= n) return;
  const unsigned m = n - start < kRun ? static_cast<unsigned>(n - start) : kRun;
  float vals[kWalkMaxRows * kRun];
  for (std::uint32_t j = 0; j < hash.rows(); ++j) {
    const float* row = table + std::size_t{j} * hash.cols();
    RowWalk<Family> walk(hash, j, static_cast<std::uint32_t>(start));
    for (unsigned q = 0; q < m; ++q) {
      std::uint32_t bucket;
      bool positive;
      walk.Next(bucket, positive);
      vals[j * kRun + q] = count_sketch_internal::ApplySign(positive, __ldg(row + bucket));
    }
  }
  for (unsigned q = 0; q < m; ++q) {
    sink(start + q, sketchps::CountSketchLowerMedian(vals + q, kRun, hash.rows()));
  }
}

// Sink: out[i] = estimate.
struct StoreAt {
  float* out;
  __device__ void operator()(std::size_t i, float est) const { out[i] = est; }
};

// Sink: appends (i, estimate) when |estimate| >= tau, at a slot taken from *count; slots past
// capacity are counted but not written.
struct AppendAtLeast {
  float tau;
  std::size_t capacity;
  std::uint32_t* idx;
  float* val;
  unsigned long long* count;
  __device__ void operator()(std::size_t i, float est) const {
    if (!(fabsf(est) >= tau)) return;
    const unsigned long long slot = atomicAdd(count, 1ull);
    if (slot < capacity) {
      idx[slot] = static_cast<std::uint32_t>(i);
      val[slot] = est;
    }
  }
};

// Runs the walked estimation of [0, n) with `sink`; false when the hash has too many rows for it.
template <class Sink>
bool EstimateRuns(const float* d_table, const CountSketchHash& hash, std::size_t n, Sink sink, const Exec& exec) {
  if (hash.rows() > kWalkMaxRows) return false;
  if (n == 0) return true;
  const auto stream = static_cast<cudaStream_t>(exec.stream);
  const int blocks = Blocks((n + kRun - 1) / kRun);
  WithFamily(hash, [&](auto family) {
    EstimateRunsKernel<decltype(family)><<<blocks, kSketchThreads, 0, stream>>>(d_table, n, hash, sink);
  });
  CudaCheck(cudaGetLastError(), "sketch estimate launch");
  return true;
}

}  // namespace sketchps::kernels::internal
#endif  // SKETCHPS_KERNELS_CUDA
