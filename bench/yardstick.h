// The bench's yardstick: one read-only pass over a float vector at memory bandwidth.
//
// Every bench time is also given as a ratio to this pass measured in the same run, so it must be as
// fast as touching every element once can be; otherwise the ratios flatter the methods. On the CPU
// backend it is a plain sum on the backend's OpenMP threads (the same team the kernels run on):
// each thread sums a contiguous slice with four independent 16-float vector accumulators, compiled
// for AVX-512, AVX2 and baseline x86-64 and picked at load time, partial sums in float per 16K
// elements and in double across them. On CUDA it falls back to kernels::SumAbs (a Thrust
// reduction, bandwidth-bound on a GPU). docs/benchmarks.md compares it with numpy.sum.
//
// Not thread-safe (it uses every backend thread).
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace sketchps::bench {

// Σ d_x[i] for i < n (a device pointer of the active backend). The summation order depends on the
// thread count and SIMD level; the value only keeps the pass from being optimized away.
absl::StatusOr<double> BandwidthSum(const float* d_x, std::size_t n, const kernels::Exec& exec);

}  // namespace sketchps::bench
