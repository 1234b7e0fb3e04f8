// Count Sketch hash families (docs/methods.md, decision 3).
//
// A sketch with parameters (rows r, cols c, seed, dim d, family) maps coordinate i in [0, d) of
// row j to a bucket h_j(i) in [0, c) and a sign s_j(i) in {−1, +1}. Two families:
//
//   kPolynomial61 (default; the specified family, CSVec's with exact arithmetic), p = 2^61 − 1:
//     h_j(i) = ((a_j·i + b_j) mod p) mod c                                      2-universal
//     s_j(i) = +1 if ((((q1_j·i + q2_j)·i + q3_j)·i + q4_j) mod p) is odd, else −1   4-wise independent
//     (a, b, q1, q2, q3, q4) are the first six draws, in that order, of row j's generator, each
//     uniform in [0, p): the top 61 bits of a draw, rejecting the one value equal to p. Exact
//     128-bit products with Mersenne reduction (not CSVec's signed 64-bit wraparound). Cost: five
//     64x64-bit multiplications per row per coordinate, or additions only when walking
//     consecutive coordinates (CountSketchPolyWalk).
//   kSplitMix64 (fast): z_j(i) = SplitMix64(k_j + i) (common/splitmix.h: a strong 64-bit mixer),
//     k_j the first draw of row j's generator. h_j(i) = ((z >> 32)·c) >> 32 (multiply-shift range
//     reduction: bucket probabilities are 1/c to within 2^-32), s_j(i) = +1 if z is odd, else −1.
//     No k-wise independence proof; tests/kernels/count_sketch_test.cc checks that its heavy-hitter
//     recall on planted spikes equals kPolynomial61's, also on structured (blocky) inputs (Project
//     decision 3). Three multiplications per coordinate: about 1.2x faster than kPolynomial61 in
//     the CPU kernels (which walk it), more where coordinates are scattered or on GPUs.
//     (Dietzfelbinger's multiply-shift, cheaper still and 2-independent, lost recall on blocky
//     inputs in our trials, as Dahlgaard, Knudsen and Thorup (NeurIPS 2017) warn for feature
//     hashing, so it is not offered.)
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

#include <cstddef>
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
  kPolynomial61 = 0,  // specified family: 2-universal buckets, 4-wise independent signs
  kSplitMix64 = 1,    // fast family: one splitmix64 output per (row, coordinate)
};

struct CountSketchParams {
  std::uint32_t rows = 5;  // r, independent hash rows, in [1, kMaxSketchRows]
  std::uint32_t cols = 0;  // c, buckets per row, >= 1, rows·cols <= kMaxSketchCells
  std::uint64_t seed = 0;  // shared by every node that must produce compatible sketches
  std::uint64_t dim = 0;   // d, length of the sketched vector, < kMaxSketchDim (0 is an empty vector)
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

// (u + v) mod p and (u·v) mod p for u, v < p.
SKETCHPS_HD inline std::uint64_t AddMod(std::uint64_t u, std::uint64_t v) {
  const std::uint64_t s = u + v;
  return s >= kMersenne61 ? s - kMersenne61 : s;
}
SKETCHPS_HD inline std::uint64_t MulMod(std::uint64_t u, std::uint64_t v) {
  return Reduce61(Fold61(static_cast<Uint128>(u) * v));  // u·v < 2^122: the fold is < 2^62
}

// h mod c for h < 2^61, with magic = floor((2^64 − 1) / c). magic undershoots 2^64 / c by less than
// 1 + 1/c, so the quotient estimate q is floor(h / c) or one less and one correction is exact.
SKETCHPS_HD inline std::uint32_t ModCols(std::uint64_t h, std::uint64_t cols, std::uint64_t magic) {
  const auto q = static_cast<std::uint64_t>((static_cast<Uint128>(h) * magic) >> 64);
  std::uint64_t rem = h - q * cols;
  if (rem >= cols) rem -= cols;
  return static_cast<std::uint32_t>(rem);
}

// v with its sign bit flipped unless `positive`: s·v for s = ±1, exact and branch-free.
SKETCHPS_HD inline float ApplySign(bool positive, float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits ^= static_cast<std::uint32_t>(!positive) << 31;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

SKETCHPS_HD inline float Min(float a, float b) { return a < b ? a : b; }
SKETCHPS_HD inline float Max(float a, float b) { return b < a ? a : b; }
SKETCHPS_HD inline float Median3(float a, float b, float c) { return Max(Min(a, b), Min(Max(a, b), c)); }

}  // namespace count_sketch_internal

// One row of kPolynomial61, small enough to keep in registers inside a loop over coordinates.
struct CountSketchPolyRow {
  std::uint64_t a, b, q1, q2, q3, q4;  // coefficients, each in [0, p)
  std::uint64_t cols;                  // c
  std::uint64_t cols_magic;            // floor((2^64 − 1) / c): exact mod c without a division

  // (a·i + b) mod p and ((a·i + b) mod p) mod c, in [0, c).
  SKETCHPS_HD std::uint64_t Line(std::uint32_t i) const {
    return count_sketch_internal::Reduce61(count_sketch_internal::MulAddFold(a, i, b));
  }
  SKETCHPS_HD std::uint32_t Bucket(std::uint32_t i) const {
    return count_sketch_internal::ModCols(Line(i), cols, cols_magic);
  }
  // The sign cubic mod p; s(i) = +1 (Positive) when it is odd.
  SKETCHPS_HD std::uint64_t Cubic(std::uint32_t i) const {
    using namespace count_sketch_internal;
    return Reduce61(MulAddFold(MulAddFold(MulAddFold(q1, i, q2), i, q3), i, q4));
  }
  SKETCHPS_HD bool Positive(std::uint32_t i) const { return (Cubic(i) & 1u) != 0; }
  // s(i)·v (exact sign flip).
  SKETCHPS_HD float Signed(std::uint32_t i, float v) const { return count_sketch_internal::ApplySign(Positive(i), v); }
};

// One row of kSplitMix64.
struct CountSketchMixRow {
  std::uint64_t key;   // k_j
  std::uint64_t cols;  // c

  SKETCHPS_HD std::uint32_t Bucket(std::uint32_t i) const {
    return static_cast<std::uint32_t>(((SplitMix64(key + i) >> 32) * cols) >> 32);
  }
  SKETCHPS_HD bool Positive(std::uint32_t i) const { return (SplitMix64(key + i) & 1u) != 0; }
  SKETCHPS_HD float Signed(std::uint32_t i, float v) const { return count_sketch_internal::ApplySign(Positive(i), v); }
};

// Walks a kPolynomial61 row over consecutive coordinates i0, i0 + 1, ... with additions only: the
// line by its slope a, the cubic by its forward differences, all mod p. Bucket() and Positive()
// equal the row's Bucket(i) and Positive(i) exactly at the current i; Next() moves to i + 1.
// About 2x cheaper per coordinate than evaluating the row (no multiplications but the mod c).
class CountSketchPolyWalk {
 public:
  SKETCHPS_HD CountSketchPolyWalk(const CountSketchPolyRow& row, std::uint32_t i0)
      : a_(row.a), cols_(row.cols), magic_(row.cols_magic), line_(row.Line(i0)), cubic_(row.Cubic(i0)) {
    using namespace count_sketch_internal;
    // P(x) = q1·x^3 + q2·x^2 + q3·x + q4: Δ1 = P(x+1) − P(x) = q1·(3x^2 + 3x + 1) + q2·(2x + 1) + q3,
    // Δ2 = Δ1(x+1) − Δ1(x) = q1·(6x + 6) + 2·q2, Δ3 = 6·q1.
    const std::uint64_t x = i0;
    d3_ = MulMod(6, row.q1);
    d2_ = AddMod(MulMod(row.q1, AddMod(MulMod(6, x), 6)), MulMod(2, row.q2));
    const std::uint64_t t = AddMod(AddMod(MulMod(3, MulMod(x, x)), MulMod(3, x)), 1);
    d1_ = AddMod(AddMod(MulMod(row.q1, t), MulMod(row.q2, AddMod(MulMod(2, x), 1))), row.q3);
  }
  SKETCHPS_HD std::uint32_t Bucket() const { return count_sketch_internal::ModCols(line_, cols_, magic_); }
  SKETCHPS_HD bool Positive() const { return (cubic_ & 1u) != 0; }
  SKETCHPS_HD void Next() {
    using count_sketch_internal::AddMod;
    line_ = AddMod(line_, a_);
    cubic_ = AddMod(cubic_, d1_);
    d1_ = AddMod(d1_, d2_);
    d2_ = AddMod(d2_, d3_);
  }

 private:
  std::uint64_t a_, cols_, magic_, line_, cubic_, d1_ = 0, d2_ = 0, d3_ = 0;
};

// The same interface for kSplitMix64, which has nothing to carry from one coordinate to the next.
class CountSketchMixWalk {
 public:
  SKETCHPS_HD CountSketchMixWalk(const CountSketchMixRow& row, std::uint32_t i0) : row_(row), i_(i0) {}
  SKETCHPS_HD std::uint32_t Bucket() const { return row_.Bucket(i_); }
  SKETCHPS_HD bool Positive() const { return row_.Positive(i_); }
  SKETCHPS_HD void Next() { ++i_; }

 private:
  CountSketchMixRow row_;
  std::uint32_t i_;
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

// The estimate rule: the lower median of v[0], v[stride], ..., v[(r − 1)·stride] (r <= 64), + 0.0f
// so that −0 becomes +0. Branch-free min/max networks for r = 1, 3, 5 (minss/maxss on x86: the two
// comparisons are written differently so that GCC does not share one compare and branch), an
// insertion sort of a copy otherwise. Inputs are expected finite.
SKETCHPS_HD inline float CountSketchLowerMedian(const float* v, std::size_t stride, std::uint32_t r) {
  using namespace count_sketch_internal;
  if (r == 1) return v[0] + 0.0f;
  if (r == 3) return Median3(v[0], v[stride], v[2 * stride]) + 0.0f;
  if (r == 5) {  // drop the smallest and the largest of the first four, then a median of three
    const float a = v[0], b = v[stride], c = v[2 * stride], d = v[3 * stride];
    return Median3(v[4 * stride], Max(Min(a, b), Min(c, d)), Min(Max(a, b), Max(c, d))) + 0.0f;
  }
  float s[kMaxSketchRows];
  for (std::uint32_t a = 0; a < r; ++a) {
    const float key = v[a * stride];
    std::uint32_t b = a;
    for (; b > 0 && s[b - 1] > key; --b) s[b] = s[b - 1];
    s[b] = key;
  }
  return s[(r - 1) / 2] + 0.0f;
}

static_assert(std::is_trivially_copyable_v<CountSketchHash>, "passed by value into device functors");
static_assert(sizeof(CountSketchHash) < 3200, "must leave room in a CUDA kernel parameter block (4 KB)");

// The hash seed of one shard's sketches: the job seed mixed with the shard id (splitmix64), so all
// workers of a shard agree and shards differ (the sketch schemes and `sketchps bench --input`).
std::uint64_t SketchSeed(std::uint64_t job_seed, std::uint32_t shard_id);

}  // namespace sketchps
