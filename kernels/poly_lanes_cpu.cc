// Interleaved kPolynomial61 walks for the CPU backend (see internal/poly_lanes.h). Compiled to
// nothing under nvcc.
#include "kernels/internal/poly_lanes.h"

#if !defined(__CUDACC__)

#include <algorithm>
#include <cstring>

namespace sketchps::kernels::internal {
namespace {

using count_sketch_internal::AddMod;
using count_sketch_internal::MulMod;

constexpr std::uint64_t kP = kMersenne61;

// Forward differences of P(x) = q1·x³ + q2·x² + q3·x + q4 with step h, all mod p:
//   Δ1(x) = q1·(3x²h + 3xh² + h³) + q2·(2xh + h²) + q3·h
//   Δ2(x) = q1·(6xh² + 6h³) + 2·q2·h²
//   Δ3    = 6·q1·h³
struct CubicDifferences {
  std::uint64_t d1, d2, d3;
};
CubicDifferences Differences(const CountSketchPolyRow& row, std::uint64_t x, std::uint64_t h) {
  const std::uint64_t h2 = MulMod(h, h), h3 = MulMod(h2, h);
  const std::uint64_t x2 = MulMod(x, x);
  const std::uint64_t c1 = AddMod(AddMod(MulMod(3, MulMod(x2, h)), MulMod(3, MulMod(x, h2))), h3);
  const std::uint64_t c2 = AddMod(MulMod(2, MulMod(x, h)), h2);
  const std::uint64_t d1 = AddMod(AddMod(MulMod(row.q1, c1), MulMod(row.q2, c2)), MulMod(row.q3, h));
  const std::uint64_t e1 = AddMod(MulMod(6, MulMod(x, h2)), MulMod(6, h3));
  const std::uint64_t d2 = AddMod(MulMod(row.q1, e1), MulMod(2, MulMod(row.q2, h2)));
  return {d1, d2, MulMod(6, MulMod(row.q1, h3))};
}

}  // namespace

PolyLanes StartPolyLanes(const CountSketchPolyRow& row, std::uint32_t first) {
  PolyLanes lanes{};
  const std::uint64_t step = MulMod(row.a, kPolyLanes);
  lanes.a_plus_1 = step + 1;
  lanes.cols = row.cols;
  lanes.bucket_step = step % row.cols;
  lanes.bucket_step_wrap = (lanes.bucket_step + row.cols - kP % row.cols) % row.cols;  // (step − p) mod c
  for (std::size_t l = 0; l < kPolyLanes; ++l) {
    const std::uint32_t i = first + static_cast<std::uint32_t>(l);
    lanes.line[l] = row.Line(i);
    lanes.bucket[l] = row.Bucket(i);
    lanes.cubic[l] = row.Cubic(i);
    const CubicDifferences d = Differences(row, i, kPolyLanes);
    lanes.d1[l] = d.d1;
    lanes.d2[l] = d.d2;
    lanes.d3_plus_1 = d.d3 + 1;
  }
  return lanes;
}

// kPolyLanes 64-bit lanes as one GCC vector: one zmm register on AVX-512, two ymm on AVX2, four xmm
// on the baseline; the state then stays in registers across the loop.
using Lanes64 = std::uint64_t __attribute__((vector_size(8 * kPolyLanes)));
using Lanes32 = std::uint32_t __attribute__((vector_size(4 * kPolyLanes)));

// For u in [1, 2^62 − 2]: a value in [1, p] congruent to u mod p (2^61 ≡ 1). Hence FOLD(x + y + 1) − 1
// is (x + y) mod p for x, y < p, exactly, with no comparison. (A macro, not a function over Lanes64:
// the calling convention of vector arguments would depend on the SIMD level.)
#define SKETCHPS_FOLD_LANES(u) (((u)&kP) + ((u) >> 61))

__attribute__((target_clones("avx512f", "avx2", "default"))) void WalkPolyLanes(PolyLanes& lanes, std::size_t steps,
                                                                                std::uint32_t* bucket,
                                                                                std::uint32_t* sign_bit) {
  Lanes64 line, buck, cubic, d1, d2;
  std::memcpy(&line, lanes.line, sizeof line);
  std::memcpy(&buck, lanes.bucket, sizeof buck);
  std::memcpy(&cubic, lanes.cubic, sizeof cubic);
  std::memcpy(&d1, lanes.d1, sizeof d1);
  std::memcpy(&d2, lanes.d2, sizeof d2);
  const std::uint64_t a1 = lanes.a_plus_1, d3_1 = lanes.d3_plus_1, cols = lanes.cols;
  const std::uint64_t step0 = lanes.bucket_step, step_flip = lanes.bucket_step ^ lanes.bucket_step_wrap;
  for (std::size_t t = 0; t < steps; ++t) {
    const Lanes32 b32 = __builtin_convertvector(buck, Lanes32);
    const Lanes32 s32 = __builtin_convertvector((~cubic & 1u) << 31, Lanes32);
    std::memcpy(bucket + t * kPolyLanes, &b32, sizeof b32);
    std::memcpy(sign_bit + t * kPolyLanes, &s32, sizeof s32);
    const Lanes64 u = line + a1;
    const Lanes64 wrap = u >> 61;  // 1 where line + a·L >= p
    line = (u & kP) + (wrap - 1);
    const Lanes64 k = buck + (step0 ^ (step_flip & (0 - wrap))) - cols;
    buck = k + (cols & (0 - (k >> 63)));  // k < 0 (as signed): add c back
    const Lanes64 cubic_sum = cubic + d1 + 1, d1_sum = d1 + d2 + 1, d2_sum = d2 + d3_1;
    cubic = SKETCHPS_FOLD_LANES(cubic_sum) - 1;
    d1 = SKETCHPS_FOLD_LANES(d1_sum) - 1;
    d2 = SKETCHPS_FOLD_LANES(d2_sum) - 1;
  }
  std::memcpy(lanes.line, &line, sizeof line);
  std::memcpy(lanes.bucket, &buck, sizeof buck);
  std::memcpy(lanes.cubic, &cubic, sizeof cubic);
  std::memcpy(lanes.d1, &d1, sizeof d1);
  std::memcpy(lanes.d2, &d2, sizeof d2);
}

#undef SKETCHPS_FOLD_LANES

void PolyLanesAccumulate(const CountSketchPolyRow& row, const float* x, std::size_t begin, std::size_t end,
                         float* table_row) {
  constexpr std::size_t kSteps = 32;  // hash 256 entries, then add them: many cache misses in flight
  std::uint32_t bucket[kSteps * kPolyLanes];
  std::uint32_t sign_bit[kSteps * kPolyLanes];
  const std::size_t lanes_end = begin + (end - begin) / kPolyLanes * kPolyLanes;
  if (lanes_end > begin) {
    PolyLanes lanes = StartPolyLanes(row, static_cast<std::uint32_t>(begin));
    for (std::size_t lo = begin; lo < lanes_end; lo += kSteps * kPolyLanes) {
      const std::size_t steps = std::min(kSteps, (lanes_end - lo) / kPolyLanes);
      WalkPolyLanes(lanes, steps, bucket, sign_bit);
      const float* v = x + lo;
      for (std::size_t q = 0; q < steps * kPolyLanes; ++q) table_row[bucket[q]] += FlipSign(v[q], sign_bit[q]);
    }
  }
  for (std::size_t i = lanes_end; i < end; ++i) {
    table_row[row.Bucket(static_cast<std::uint32_t>(i))] += row.Signed(static_cast<std::uint32_t>(i), x[i]);
  }
}

}  // namespace sketchps::kernels::internal

#endif  // !defined(__CUDACC__)
