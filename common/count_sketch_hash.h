// Count Sketch hash families (ALGORITHMS.md §1.3 and Project decision 3).
//
// A sketch with parameters (rows r, cols c, seed, dim d, family) maps coordinate i in [0, d) of
// row j to a bucket h_j(i) in [0, c) and a sign s_j(i) in {−1, +1}. Two families:
//
//   kPolynomial61 (default; the specified family, CSVec's with exact arithmetic), p = 2^61 − 1:
//     h_j(i) = ((a_j·i + b_j) mod p) mod c                                      2-universal
//     s_j(i) = +1 if ((((q1_j·i + q2_j)·i + q3_j)·i + q4_j) mod p) is odd, else −1   4-wise independent
//     (a, b, q1, q2, q3, q4) are the first six draws, in that order, of row j's generator, each
//     uniform in [0, p): the top 61 bits of a draw, rejecting the one value equal to p. Exact
//     128-bit products with Mersenne reduction (not CSVec's signed 64-bit wraparound). Cost: about
//     five 64x64-bit multiplications per row per coordinate.
//   kSplitMix64 (fast): z_j(i) = SplitMix64(k_j + i) (common/splitmix.h: a strong 64-bit mixer),
//     k_j the first draw of row j's generator. h_j(i) = ((z >> 32)·c) >> 32 (multiply-shift range
//     reduction: bucket probabilities are 1/c to within 2^-32), s_j(i) = +1 if z is odd, else −1.
//     No k-wise independence proof; tests/kernels/count_sketch_test.cc checks that its heavy-hitter
//     recall on planted spikes equals kPolynomial61's, also on structured (blocky) inputs (Project
//     decision 3). About 3x cheaper to evaluate on CPUs. (Dietzfelbinger's multiply-shift, cheaper
//     still and 2-independent, lost recall on blocky inputs in our trials, as Dahlgaard, Knudsen and
//     Thorup (NeurIPS 2017) warn for feature hashing, so it is not offered.)
//
// Row j's generator is SplitMix64Rng(CountSketchRowSeed(seed, j)). Hence the same (seed, rows,
// cols, dim, family) gives identical buckets and signs on every node, thread count and backend
// (CPU or CUDA): everything is exact integer arithmetic.
//
// Estimates take the median over rows of s_j(i)·T[j][h_j(i)]. Odd r is the default (5); with
// even r the estimate is the LOWER of the two middle values (CSVec/torch.median rule).
//
// CountSketchHash is trivially copyable and holds no pointers (a fixed array of up to 64 rows of
// coefficients, ~3 KB), so kernels pass it by value into device functors. Its SKETCHPS_HD members
// are const and thread-safe. It is built only on the host, by Create(), which validates params.
//
// This header is included by kernels/*.cc (C++17, also compiled by nvcc): keep it C++17 and free
// of host-only constructs in SKETCHPS_HD functions.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/hd.h"
#include "common/splitmix.h"

namespace sketchps {

inline constexpr std::uint64_t kMersenne61 = (std::uint64_t{1} << 61) - 1;  // p
inline constexpr std::uint32_t kMaxSketchRows = 64;
// Upper bound on rows·cols: 2^28 float32 cells = 1 GiB per table. Kernels may hold a few private
// copies of a table in scratch memory on the CPU backend (kernels/count_sketch.h), and a table is a
// wire payload, so anything near this bound is a configuration error in practice.
inline constexpr std::uint64_t kMaxSketchCells = std::uint64_t{1} << 28;
// Coordinates are uint32 (shard-local indices), so dim must stay below 2^32.
inline constexpr std::uint64_t kMaxSketchDim = std::uint64_t{1} << 32;

enum class CountSketchFamily : std::uint32_t {
  kPolynomial61 = 0,   // specified family: 2-universal buckets, 4-wise independent signs
  kSplitMix64 = 1,     // fast family: one splitmix64 output per (row, coordinate)
};

struct CountSketchParams {
  std::uint32_t rows = 5;   // r, independent hash rows, in [1, kMaxSketchRows]
  std::uint32_t cols = 0;   // c, buckets per row, >= 1, rows·cols <= kMaxSketchCells
  std::uint64_t seed = 0;   // shared by every node that must produce compatible sketches
  std::uint64_t dim = 0;    // d, length of the sketched vector, < kMaxSketchDim (0 is an empty vector)
  CountSketchFamily family = CountSketchFamily::kPolynomial61;

  // OK, or InvalidArgument naming the offending field ("rows", "cols", "dim", "family").
  absl::Status Validate() const;
  // Number of table cells, rows·cols.
  std::uint64_t Cells() const { return std::uint64_t{rows} * cols; }
};

namespace count_sketch_internal {

// 128-bit products (GCC/Clang/nvcc extension; __extension__ silences -Wpedantic).
__extension__ typedef unsigned __int128 Uint128;

// Folds t into a value congruent to t mod p (2^61 ≡ 1). For t < 2^95, the only range used here,
// the result is < 2^61 + 2^34.
SKETCHPS_HD inline std::uint64_t Fold61(Uint128 t) {
  const auto lo = static_cast<std::uint64_t>(t);
  const auto hi = static_cast<std::uint64_t>(t >> 64);
  return (lo & kMersenne61) + ((hi << 3) | (lo >> 61));
}

// y·i + c, folded: for y < 2^63, i < 2^32 and c < 2^62 the result is < 2^63 and congruent mod p.
// (c is added after the fold so that the 128-bit product needs no carry chain.)
SKETCHPS_HD inline std::uint64_t MulAddFold(std::uint64_t y, std::uint32_t i, std::uint64_t c) {
  return Fold61(static_cast<Uint128>(y) * i) + c;
}

// Exact v mod p for v < 2^63.
SKETCHPS_HD inline std::uint64_t Reduce61(std::uint64_t v) {
  v = (v & kMersenne61) + (v >> 61);
  return v >= kMersenne61 ? v - kMersenne61 : v;
}

// v with its sign bit flipped unless `positive`: s·v for s = ±1, exact and branch-free.
SKETCHPS_HD inline float ApplySign(bool positive, float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits ^= static_cast<std::uint32_t>(!positive) << 31;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

}  // namespace count_sketch_internal

// One row of kPolynomial61, small enough to keep in registers inside a loop over coordinates.
struct CountSketchPolyRow {
  std::uint64_t a, b, q1, q2, q3, q4;  // coefficients, each in [0, p)
  std::uint64_t cols;                  // c
  std::uint64_t cols_magic;            // floor((2^64 − 1) / c): exact mod c without a division

  // ((a·i + b) mod p) mod c, in [0, c).
  SKETCHPS_HD std::uint32_t Bucket(std::uint32_t i) const {
    using namespace count_sketch_internal;
    const std::uint64_t h = Reduce61(MulAddFold(a, i, b));
    // cols_magic undershoots 2^64 / c by less than 1 + 1/c, so for h < 2^61 the quotient estimate
    // q is floor(h / c) or one less, and one conditional subtraction makes the remainder exact.
    const auto q = static_cast<std::uint64_t>((static_cast<Uint128>(h) * cols_magic) >> 64);
    std::uint64_t rem = h - q * cols;
    if (rem >= cols) rem -= cols;
    return static_cast<std::uint32_t>(rem);
  }
  // True when s(i) = +1, i.e. the cubic polynomial mod p is odd.
  SKETCHPS_HD bool Positive(std::uint32_t i) const {
    using namespace count_sketch_internal;
    const std::uint64_t y = MulAddFold(MulAddFold(MulAddFold(q1, i, q2), i, q3), i, q4);
    return (Reduce61(y) & 1u) != 0;
  }
  // s(i)·v (exact sign flip).
  SKETCHPS_HD float Signed(std::uint32_t i, float v) const {
    return count_sketch_internal::ApplySign(Positive(i), v);
  }
};

// One row of kSplitMix64.
struct CountSketchMixRow {
  std::uint64_t key;   // k_j
  std::uint64_t cols;  // c

  SKETCHPS_HD std::uint32_t Bucket(std::uint32_t i) const {
    return static_cast<std::uint32_t>(((SplitMix64(key + i) >> 32) * cols) >> 32);
  }
  SKETCHPS_HD bool Positive(std::uint32_t i) const { return (SplitMix64(key + i) & 1u) != 0; }
  SKETCHPS_HD float Signed(std::uint32_t i, float v) const {
    return count_sketch_internal::ApplySign(Positive(i), v);
  }
};

// The row seed: row j's coefficients come from SplitMix64Rng(CountSketchRowSeed(seed, j)).
std::uint64_t CountSketchRowSeed(std::uint64_t seed, std::uint32_t row);

class CountSketchHash {
 public:
  // Validates params and draws the coefficients. Errors: those of params.Validate().
  static absl::StatusOr<CountSketchHash> Create(const CountSketchParams& params);

  // An empty hash (rows() == 0); only useful as a placeholder to assign to.
  CountSketchHash() = default;

  SKETCHPS_HD std::uint32_t rows() const { return rows_; }
  SKETCHPS_HD std::uint32_t cols() const { return cols_; }
  SKETCHPS_HD std::uint64_t dim() const { return dim_; }
  SKETCHPS_HD std::uint64_t seed() const { return seed_; }
  SKETCHPS_HD CountSketchFamily family() const { return family_; }
  SKETCHPS_HD std::uint64_t cells() const { return std::uint64_t{rows_} * cols_; }
  CountSketchParams params() const { return CountSketchParams{rows_, cols_, seed_, dim_, family_}; }

  // Row `row` (< rows()) of the family in use; kernels pick the accessor once per call.
  SKETCHPS_HD CountSketchPolyRow PolyRow(std::uint32_t row) const {
    const std::uint64_t* c = coef_[row];
    return CountSketchPolyRow{c[0], c[1], c[2], c[3], c[4], c[5], cols_, cols_magic_};
  }
  SKETCHPS_HD CountSketchMixRow MixRow(std::uint32_t row) const { return CountSketchMixRow{coef_[row][0], cols_}; }

  // h_row(i) in [0, cols()); row < rows(), i < 2^32 (callers keep i < dim()).
  SKETCHPS_HD std::uint32_t Bucket(std::uint32_t row, std::uint32_t i) const {
    return family_ == CountSketchFamily::kSplitMix64 ? MixRow(row).Bucket(i) : PolyRow(row).Bucket(i);
  }
  // s_row(i) in {−1, +1}.
  SKETCHPS_HD int Sign(std::uint32_t row, std::uint32_t i) const {
    const bool positive =
        family_ == CountSketchFamily::kSplitMix64 ? MixRow(row).Positive(i) : PolyRow(row).Positive(i);
    return positive ? 1 : -1;
  }

 private:
  std::uint32_t rows_ = 0;
  std::uint32_t cols_ = 0;
  std::uint64_t seed_ = 0;
  std::uint64_t dim_ = 0;
  CountSketchFamily family_ = CountSketchFamily::kPolynomial61;
  std::uint64_t cols_magic_ = 0;
  std::uint64_t coef_[kMaxSketchRows][6] = {};  // kSplitMix64 uses coef_[row][0] = k_row only
};

static_assert(std::is_trivially_copyable_v<CountSketchHash>, "passed by value into device functors");
static_assert(sizeof(CountSketchHash) < 3200, "must leave room in a CUDA kernel parameter block (4 KB)");

}  // namespace sketchps
