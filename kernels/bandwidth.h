// The benchmarks' yardstick: one read-only pass over a float vector at memory bandwidth.
//
// Every bench time is also given as a ratio to this pass measured in the same run, so it must be as
// fast as touching every element once can be; otherwise the ratios flatter the methods.
//   CPU   a plain sum on the backend's OpenMP threads (the team the kernels run on): each thread sums
//         a contiguous slice with four independent 16-float vector accumulators, compiled for
//         AVX-512, AVX2 and baseline x86-64 and picked at load time, partial sums in float per 16K
//         elements and in double across them. docs/reports/benchmarks.md measures it (the stream pass row).
//   CUDA  the backends' deterministic reduction (internal/device_reduce.h): 16-byte loads, a fixed
//         grid, per-thread sums in double. docs/gpu.md compares it with torch's sum and copy.
//
// Not thread-safe (it uses every backend thread).
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace sketchps::kernels {

// Σ d_x[i] for i < n (a device pointer of the active backend). The summation order depends on the
// backend, its thread count and SIMD level; the value only keeps the pass from being optimized away.
absl::StatusOr<double> BandwidthSum(const float* d_x, std::size_t n, const Exec& exec);

// Seconds the device itself spends on one BandwidthSum pass over d_x, without the host's part.
//   CUDA  CUDA events on exec.stream around the pass's two kernels, whose sum stays in device memory
//         (not copied back, no synchronization in between): the way torch's g.sum() is timed in
//         docs/gpu.md, so the two compare. Includes the launch of the first kernel after the start
//         event, as torch's time does.
//   CPU   the steady clock around BandwidthSum: host and device are one.
// Errors as BandwidthSum; 0 when n is 0.
absl::StatusOr<double> BandwidthPassDeviceSeconds(const float* d_x, std::size_t n, const Exec& exec);

}  // namespace sketchps::kernels
