// Internal, CPU backend only: kPolynomial61 hashes of kPolyLanes interleaved walks at once, written
// so that the compiler keeps the lanes in SIMD registers.
//
// Lane l starts at coordinate first + l and every lane advances by kPolyLanes per step, so one step
// hashes the kPolyLanes consecutive coordinates first + s·kPolyLanes + [0, kPolyLanes), and a batch
// of steps covers a contiguous range in coordinate order. Each lane walks
//   line  = (a·i + b) mod p         by adding a·L mod p      (L = kPolyLanes),
//   bucket = line mod c             by adding (a·L mod p) mod c, minus p mod c when the line wrapped,
//   cubic = P(i) mod p              by forward differences of step L (three additions mod p),
// using only 64-bit add, and, logical shift and subtract (no multiplication, no comparison), which
// every x86-64 SIMD level provides. Results equal CountSketchPolyRow::Bucket / Positive exactly
// (tests/kernels/poly_lanes_test.cc).
//
// WalkPolyLanes is compiled once per SIMD level (baseline, AVX2, AVX-512) and picked at load time.
// Not declared under nvcc: the CUDA backend hashes one coordinate per thread instead.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/count_sketch_hash.h"

namespace sketchps::kernels::internal {

constexpr std::size_t kPolyLanes = 8;

// The walk state of kPolyLanes lanes of one row, plus the row's step constants.
struct PolyLanes {
  std::uint64_t line[kPolyLanes];
  std::uint64_t bucket[kPolyLanes];
  std::uint64_t cubic[kPolyLanes];
  std::uint64_t d1[kPolyLanes];  // P(i + L) − P(i)
  std::uint64_t d2[kPolyLanes];  // second difference
  std::uint64_t d3_plus_1;       // third difference (constant) + 1
  std::uint64_t a_plus_1;        // a·L mod p, + 1
  std::uint64_t cols;
  std::uint64_t bucket_step;       // (a·L mod p) mod c
  std::uint64_t bucket_step_wrap;  // (a·L mod p − p) mod c, used when the line wrapped past p
};

// Lanes of `row` positioned at coordinates first, first + 1, ..., first + kPolyLanes − 1
// (first + kPolyLanes − 1 < 2^32).
PolyLanes StartPolyLanes(const CountSketchPolyRow& row, std::uint32_t first);

// For s < steps and l < kPolyLanes, the coordinate i = (current position of lane l) + s·kPolyLanes:
//   bucket[s·kPolyLanes + l] = row.Bucket(i),
//   sign_bit[s·kPolyLanes + l] = 0 if row.Positive(i) else 0x80000000 (XOR it into a float's bits),
// then advances every lane by steps·kPolyLanes coordinates.
void WalkPolyLanes(PolyLanes& lanes, std::size_t steps, std::uint32_t* bucket, std::uint32_t* sign_bit);

// table_row[row.Bucket(i)] += s(i)·x[i] for every i in [begin, end), end <= 2^32, in increasing i
// (the same float additions, in the same order, as a loop over i).
void PolyLanesAccumulate(const CountSketchPolyRow& row, const float* x, std::size_t begin, std::size_t end,
                         float* table_row);

// v with the sign bit flipped when sign_bit is 0x80000000 (exact s·v for s = ±1).
inline float FlipSign(float v, std::uint32_t sign_bit) { return count_sketch_internal::ApplySign(sign_bit == 0, v); }

}  // namespace sketchps::kernels::internal
