// The bandwidth yardstick (see bandwidth.h).
#include "kernels/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/internal/pointer_check.h"
#include "kernels/internal/policy.h"

#if SKETCHPS_KERNELS_CUDA
#include "kernels/internal/device_reduce.h"
#else
#include <omp.h>
#endif

namespace sketchps::kernels {
namespace {

#if !SKETCHPS_KERNELS_CUDA
// 16 floats as one GCC vector: one zmm register on AVX-512, two ymm on AVX2, four xmm otherwise.
using Floats16 = float __attribute__((vector_size(64)));

// Σ x[0..n): float sums over blocks of kBlock elements (4 independent accumulators, so that the
// add latency never limits the loads), added in double.
__attribute__((target_clones("avx512f", "avx2", "default"))) double SliceSum(const float* x, std::size_t n) {
  constexpr std::size_t kBlock = 16384;
  double total = 0.0;
  for (std::size_t lo = 0; lo < n; lo += kBlock) {
    const std::size_t m = std::min(kBlock, n - lo);
    const float* p = x + lo;
    Floats16 a0{}, a1{}, a2{}, a3{};
    std::size_t i = 0;
    for (; i + 64 <= m; i += 64) {
      Floats16 v0, v1, v2, v3;
      std::memcpy(&v0, p + i, sizeof v0);
      std::memcpy(&v1, p + i + 16, sizeof v1);
      std::memcpy(&v2, p + i + 32, sizeof v2);
      std::memcpy(&v3, p + i + 48, sizeof v3);
      a0 += v0;
      a1 += v1;
      a2 += v2;
      a3 += v3;
    }
    const Floats16 a = (a0 + a1) + (a2 + a3);
    float s = 0.0f;
    for (int l = 0; l < 16; ++l) s += a[l];
    for (; i < m; ++i) s += p[i];
    total += s;
  }
  return total;
}
#endif

#if SKETCHPS_KERNELS_CUDA
// Creates a CUDA event on construction, destroys it on scope exit.
class ScopedEvent {
 public:
  ScopedEvent() { internal::CudaCheck(cudaEventCreate(&event_), "cudaEventCreate"); }
  ~ScopedEvent() { cudaEventDestroy(event_); }
  ScopedEvent(const ScopedEvent&) = delete;
  ScopedEvent& operator=(const ScopedEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_{};
};
#endif

}  // namespace

absl::StatusOr<double> BandwidthPassDeviceSeconds(const float* d_x, std::size_t n, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExecAndPointer("BandwidthPassDeviceSeconds", exec, "d_x", d_x, n));
  if (n == 0) return 0.0;
#if SKETCHPS_KERNELS_CUDA
  const auto stream = static_cast<cudaStream_t>(exec.stream);
  internal::ScratchArray<double> partials(*exec.scratch, static_cast<std::size_t>(internal::ReduceGrid(n)) + 1);
  const ScopedEvent start, stop;
  internal::CudaCheck(cudaEventRecord(start.get(), stream), "cudaEventRecord");
  internal::QueueSumFloats(d_x, n, internal::PlainTerm{}, partials, stream);
  internal::CudaCheck(cudaEventRecord(stop.get(), stream), "cudaEventRecord");
  internal::CudaCheck(cudaEventSynchronize(stop.get()), "the timed pass");
  float ms = 0.0f;
  internal::CudaCheck(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime");
  return static_cast<double>(ms) * 1e-3;
#else
  const auto begin = std::chrono::steady_clock::now();
  SKETCHPS_RETURN_IF_ERROR(BandwidthSum(d_x, n, exec).status());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
#endif
}

absl::StatusOr<double> BandwidthSum(const float* d_x, std::size_t n, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExecAndPointer("BandwidthSum", exec, "d_x", d_x, n));
#if SKETCHPS_KERNELS_CUDA
  return internal::DeviceSumFloats(d_x, n, internal::PlainTerm{}, exec);
#else
  (void)exec;
  double sum = 0.0;
#pragma omp parallel reduction(+ : sum)
  {
    // Contiguous slices that start on a 64-byte boundary of the (aligned) vector.
    const std::size_t t = static_cast<std::size_t>(omp_get_thread_num());
    const std::size_t threads = static_cast<std::size_t>(omp_get_num_threads());
    const std::size_t lo = std::min(n, n * t / threads / 16 * 16);
    const std::size_t hi = t + 1 == threads ? n : std::min(n, n * (t + 1) / threads / 16 * 16);
    sum += SliceSum(d_x + lo, hi - lo);
  }
  return sum;
#endif
}

}  // namespace sketchps::kernels
