// Streaming dense operations (see vector_ops.h). One Thrust source for the CPU (OpenMP) and CUDA
// backends.
#include "kernels/vector_ops.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/fill.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include "absl/strings/str_cat.h"
#include "common/checksum_term.h"
#include "common/status.h"
#include "kernels/internal/chunked_select.h"
#include "kernels/internal/device_reduce.h"
#include "kernels/internal/pointer_check.h"
#include "kernels/internal/policy.h"

namespace sketchps::kernels {
namespace {

using internal::Policy;

// Σ|x| of one fixed-size chunk, vectorized on the CPU: the yardstick streaming pass must be as fast
// as a plain pass can be, or every ratio measured against it flatters the kernel.
struct ChunkAbsSum {
  const float* x;
  std::size_t n;
  SKETCHPS_HD double operator()(std::size_t c) const {
    const std::size_t begin = c * internal::kSelectChunk;
    const std::size_t end = n - begin < internal::kSelectChunk ? n : begin + internal::kSelectChunk;
    const float* v = x + begin;
    const int len = static_cast<int>(end - begin);
    float sum = 0.0f;  // float within a chunk (<= 16384 terms), double across chunks
#if !SKETCHPS_KERNELS_CUDA
#pragma omp simd reduction(+ : sum)
#endif
    for (int i = 0; i < len; ++i) sum += fabsf(v[i]);
    return static_cast<double>(sum);
  }
};

struct SquareAsDouble {
  SKETCHPS_HD double operator()(float v) const { return static_cast<double>(v) * static_cast<double>(v); }
};
// Bit-pattern test: exponent all ones means NaN or Inf, whatever the compiler's math flags.
struct NotFinite {
  SKETCHPS_HD bool operator()(float v) const {
    std::uint32_t bits = 0;
    memcpy(&bits, &v, sizeof(bits));
    return (bits & 0x7f800000u) == 0x7f800000u;
  }
};
struct AxpyOp {
  float a;
  SKETCHPS_HD float operator()(float x, float y) const { return y + a * x; }
};
struct ScaleOp {
  float a;
  SKETCHPS_HD float operator()(float x) const { return a * x; }
};

// (Σ(x - shift), Σ(x - shift)²) in double.
struct ShiftedSums {
  double s1 = 0.0;
  double s2 = 0.0;
  SKETCHPS_HD ShiftedSums operator+(const ShiftedSums& o) const { return ShiftedSums{s1 + o.s1, s2 + o.s2}; }
};
struct ShiftedTerms {
  double shift;
  SKETCHPS_HD ShiftedSums operator()(float v) const {
    const double d = static_cast<double>(v) - shift;
    return ShiftedSums{d, d * d};
  }
};
struct AddSums {
  SKETCHPS_HD ShiftedSums operator()(const ShiftedSums& a, const ShiftedSums& b) const { return a + b; }
};

struct ChecksumOf {
  const float* x;
  SKETCHPS_HD std::uint64_t operator()(std::size_t i) const { return ChecksumTerm(i, x[i]); }
};

}  // namespace

absl::StatusOr<std::uint64_t> Checksum(const float* d_x, std::size_t n, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExecAndPointer("Checksum", exec, "d_x", d_x, n));
  if (n == 0) return std::uint64_t{0};
#if SKETCHPS_KERNELS_CUDA
  return internal::DeviceSumIndices(n, ChecksumOf{d_x}, exec);
#else
  thrust::counting_iterator<std::size_t> first(0);
  return thrust::transform_reduce(Policy(exec), first, first + n, ChecksumOf{d_x}, std::uint64_t{0},
                                  thrust::plus<std::uint64_t>());
#endif
}

absl::StatusOr<double> SumAbs(const float* d_x, std::size_t n, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExecAndPointer("SumAbs", exec, "d_x", d_x, n));
  if (n == 0) return 0.0;
#if SKETCHPS_KERNELS_CUDA
  return internal::DeviceSumFloats(d_x, n, internal::AbsTerm{}, exec);
#else
  const std::size_t chunks = (n + internal::kSelectChunk - 1) / internal::kSelectChunk;
  thrust::counting_iterator<std::size_t> first(0);
  return thrust::transform_reduce(Policy(exec), first, first + chunks, ChunkAbsSum{d_x, n}, 0.0,
                                  thrust::plus<double>());
#endif
}

absl::StatusOr<double> SumSquares(const float* d_x, std::size_t n, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExecAndPointer("SumSquares", exec, "d_x", d_x, n));
  if (n == 0) return 0.0;
#if SKETCHPS_KERNELS_CUDA
  return internal::DeviceSumFloats(d_x, n, internal::SquareTerm{}, exec);
#else
  return thrust::transform_reduce(Policy(exec), d_x, d_x + n, SquareAsDouble{}, 0.0, thrust::plus<double>());
#endif
}

absl::StatusOr<double> Norm2(const float* d_x, std::size_t n, const Exec& exec) {
  SKETCHPS_ASSIGN_OR_RETURN(const double sum_squares, SumSquares(d_x, n, exec));
  return std::sqrt(sum_squares);
}

absl::StatusOr<Moments> MeanStd(const float* d_x, std::size_t n, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExecAndPointer("MeanStd", exec, "d_x", d_x, n));
  if (n == 0) return absl::InvalidArgumentError("MeanStd: n = 0 (no mean of an empty range)");
  // Shifting by one element keeps Σd² - (Σd)²/n well conditioned when |mean| >> std.
  float first = 0.0f;
  CopyToHost(&first, d_x, sizeof(float));
  const double shift = std::isfinite(first) ? static_cast<double>(first) : 0.0;
#if SKETCHPS_KERNELS_CUDA
  const ShiftedSums sums = internal::DeviceSumFloats(d_x, n, ShiftedTerms{shift}, exec);
#else
  const ShiftedSums sums =
      thrust::transform_reduce(Policy(exec), d_x, d_x + n, ShiftedTerms{shift}, ShiftedSums{}, AddSums{});
#endif
  const double count = static_cast<double>(n);
  const double mean_shifted = sums.s1 / count;
  const double variance = sums.s2 / count - mean_shifted * mean_shifted;
  return Moments{shift + mean_shifted, std::sqrt(variance > 0.0 ? variance : 0.0)};
}

absl::StatusOr<bool> AllFinite(const float* d_x, std::size_t n, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExecAndPointer("AllFinite", exec, "d_x", d_x, n));
  if (n == 0) return true;
#if SKETCHPS_KERNELS_CUDA
  return internal::DeviceSumFloats(d_x, n, internal::NotFiniteTerm{}, exec) == 0.0;
#else
  return thrust::count_if(Policy(exec), d_x, d_x + n, NotFinite{}) == 0;
#endif
}

absl::Status Axpy(float a, const float* d_x, float* d_y, std::size_t n, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExecAndPointer("Axpy", exec, "d_x", d_x, n));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExecAndPointer("Axpy", exec, "d_y", d_y, n));
  if (n == 0) return absl::OkStatus();
  thrust::transform(Policy(exec), d_x, d_x + n, d_y, d_y, AxpyOp{a});
  return absl::OkStatus();
}

absl::Status Scale(float a, float* d_x, std::size_t n, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExecAndPointer("Scale", exec, "d_x", d_x, n));
  if (n == 0) return absl::OkStatus();
  thrust::transform(Policy(exec), d_x, d_x + n, d_x, ScaleOp{a});
  return absl::OkStatus();
}

absl::Status Copy(const float* d_src, float* d_dst, std::size_t n, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExecAndPointer("Copy", exec, "d_src", d_src, n));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExecAndPointer("Copy", exec, "d_dst", d_dst, n));
  if (n == 0 || d_src == d_dst) return absl::OkStatus();
  thrust::copy(Policy(exec), d_src, d_src + n, d_dst);
  return absl::OkStatus();
}

absl::Status Fill(float value, float* d_x, std::size_t n, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExecAndPointer("Fill", exec, "d_x", d_x, n));
  if (n == 0) return absl::OkStatus();
  thrust::fill(Policy(exec), d_x, d_x + n, value);
  return absl::OkStatus();
}

}  // namespace sketchps::kernels
