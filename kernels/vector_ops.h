// Streaming dense operations on device arrays: reductions (sum of magnitudes, sum of squares,
// norm, mean/standard deviation, finiteness) and elementwise updates (axpy, scale, copy, fill).
//
// Contract shared by every function here:
//   - Pointers are device pointers of the active backend (kernels/backend.h); on the CPU backend
//     any host pointer qualifies. The caller owns every buffer; nothing is retained after return.
//   - Temporary storage comes from exec.scratch, which must be non-null; no other allocation.
//   - n = 0 is valid everywhere (an empty range) except MeanStd, which has no mean to report.
//   - Errors: InvalidArgument, naming the argument, when a pointer is null while n > 0, or when
//     exec.scratch is null. Nothing is written when an error is returned.
//   - Reductions accumulate in double; their result is deterministic for a fixed backend and
//     thread count (the partition of the sum depends on both; on CUDA on n only,
//     internal/device_reduce.h), and agrees with a naive double loop to about n * 1e-16 relative.
//   - Elementwise updates are exact float operations, never contracted to fused multiply-adds (the
//     CUDA library is built with --fmad=false), so both backends round them alike.
//   - Thread-safety: as the Exec (one thread per Scratch at a time); distinct Execs may run
//     concurrently on disjoint outputs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace sketchps::kernels {

// The replica checksum of x[0..n) (common/checksum.h): Σ ChecksumTerm(i, x_i) mod 2^64, computed
// where x lives; bitwise equal to WeightsChecksum of the same values on the host.
absl::StatusOr<std::uint64_t> Checksum(const float* d_x, std::size_t n, const Exec& exec);

// Σ|x_i|: one streaming pass, vectorized, summed in float within 16384-element chunks and in double
// across them (relative error ~1e-7 · log). Benchmarks use it as the cost of touching every element
// once, so it is kept as fast as a plain pass can be.
absl::StatusOr<double> SumAbs(const float* d_x, std::size_t n, const Exec& exec);

// Σ x_i².
absl::StatusOr<double> SumSquares(const float* d_x, std::size_t n, const Exec& exec);

// ‖x‖₂ = sqrt(Σ x_i²).
absl::StatusOr<double> Norm2(const float* d_x, std::size_t n, const Exec& exec);

// Mean and population standard deviation (divisor n) of a vector.
struct Moments {
  double mean = 0.0;
  double std = 0.0;
};

// Mean and population standard deviation of d_x[0..n) in one pass. Sums are taken in double
// around a shift (x[0]), so a large common offset does not cancel the variance away.
// Errors: InvalidArgument when n == 0 (argument "n").
absl::StatusOr<Moments> MeanStd(const float* d_x, std::size_t n, const Exec& exec);

// True when no entry is NaN or ±Inf (checked on the bit pattern, so fast-math flags cannot
// fold it away). The NaN/Inf guard every scheme runs before compressing.
absl::StatusOr<bool> AllFinite(const float* d_x, std::size_t n, const Exec& exec);

// y ← y + a·x, elementwise. d_x and d_y may be the same array (then y ← (1 + a)·y).
absl::Status Axpy(float a, const float* d_x, float* d_y, std::size_t n, const Exec& exec);

// x ← a·x, elementwise.
absl::Status Scale(float a, float* d_x, std::size_t n, const Exec& exec);

// dst ← src. The ranges must not overlap unless they are identical.
absl::Status Copy(const float* d_src, float* d_dst, std::size_t n, const Exec& exec);

// x ← value, elementwise.
absl::Status Fill(float value, float* d_x, std::size_t n, const Exec& exec);

}  // namespace sketchps::kernels
