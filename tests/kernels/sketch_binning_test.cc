// The column-binned Count Sketch loops (kernels/internal/sketch_binning.h) against the unbinned
// ones: the same thread count must give the same tables and estimates bit for bit.
#include "kernels/internal/sketch_binning.h"

#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/count_sketch.h"
#include "support/reference.h"
#include "support/sketch_reference.h"

namespace sk = sketchps::kernels;
namespace internal = sketchps::kernels::internal;
using sketchps::CountSketchFamily;
using sketchps::CountSketchHash;
using Mode = internal::SketchBinning::Mode;

namespace {

CountSketchHash MakeHash(std::uint32_t rows, std::uint32_t cols, std::uint64_t dim, CountSketchFamily family) {
  auto hash = CountSketchHash::Create({rows, cols, 11, dim, family});
  REQUIRE(hash.ok());
  return *hash;
}

// Gaussian values (sums depend on the order of additions) with a fraction of exact zeros.
std::vector<float> GaussianWithZeros(std::size_t n, std::uint64_t seed, double zero_fraction) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::bernoulli_distribution zero(zero_fraction);
  std::vector<float> x(n);
  for (auto& v : x) v = zero(rng) ? 0.0f : normal(rng);
  return x;
}

// Bitwise equality (a bool, so that a failure does not print vectors of a million entries).
template <class T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// A shape that exercises several bins per row (2^bin_cols_log2 columns, a ragged last bin) and
// several estimation items (2^item_log2 coordinates, a ragged last item), with n entries of a
// sketch of dim >= n.
struct Shape {
  std::size_t n;
  std::uint64_t dim;
  std::uint32_t rows;
  std::uint32_t cols;
  std::uint32_t bin_cols_log2;
  std::uint32_t item_log2;
  internal::SketchBinning Large() const { return {Mode::kOn, bin_cols_log2, item_log2}; }
};
const internal::SketchBinning kDirect{Mode::kOff, 0, 0};

struct Fixture {
  sk::Scratch scratch;
  sk::Exec exec{nullptr, &scratch};

  // initial + S(x), dense or as (index, value) pairs of the nonzero entries (every third split in two).
  std::vector<float> Sketch(const std::vector<float>& x, const CountSketchHash& hash, const std::vector<float>& initial,
                            bool sparse, internal::SketchBinning binning) {
    sk::DeviceArray<float> table(initial);
    if (!sparse) {
      sk::DeviceArray<float> d_x(x);
      REQUIRE(internal::SketchAccumulateWith(d_x.data(), x.size(), hash, table.data(), exec, binning).ok());
      return table.ToHost();
    }
    std::vector<std::uint32_t> idx;
    std::vector<float> val;
    for (std::uint32_t i = 0; i < x.size(); ++i) {
      if (x[i] == 0.0f) continue;
      idx.push_back(i);
      val.push_back(i % 3 == 0 ? 0.5f * x[i] : x[i]);
      if (i % 3 == 0) idx.push_back(i), val.push_back(0.5f * x[i]);
    }
    sk::DeviceArray<std::uint32_t> d_idx(idx);
    sk::DeviceArray<float> d_val(val);
    REQUIRE(
        internal::SketchAccumulateSparseWith(d_idx.data(), d_val.data(), idx.size(), hash, table.data(), exec, binning)
            .ok());
    return table.ToHost();
  }
  std::vector<float> EstimateAll(const std::vector<float>& table, const CountSketchHash& hash, std::size_t n,
                                 internal::SketchBinning binning) {
    sk::DeviceArray<float> d_table(table), est(n);
    REQUIRE(internal::SketchEstimateAllWith(d_table.data(), hash, n, est.data(), exec, binning).ok());
    return est.ToHost();
  }
  std::pair<std::vector<std::uint32_t>, std::vector<float>> Recover(const std::vector<float>& table,
                                                                    const CountSketchHash& hash, std::size_t n,
                                                                    std::size_t k, internal::SketchBinning binning) {
    sk::DeviceArray<float> d_table(table), val(k);
    sk::DeviceArray<std::uint32_t> idx(k);
    auto count = internal::SketchRecoverWith(d_table.data(), hash, n, k, idx.data(), val.data(), exec, binning);
    REQUIRE(count.ok());
    return {idx.ToHost(*count), val.ToHost(*count)};
  }
};

const auto kBothFamilies = {CountSketchFamily::kPolynomial61, CountSketchFamily::kSplitMix64};

// 47 bins of 64 columns (the last one of 56) with lists of 64 records, so lists fill many times; 98
// bins of 1024 columns over more entries than one CPU sweep chunk (2^20) per thread; a sketch of
// larger dim than the input; one bin per row; one row. Items of 2^10 to 2^16 coordinates.
const auto kShapes = {Shape{200003, 200003, 5, 3000, 6, 10}, Shape{2500001, 2500001, 3, 100000, 10, 16},
                      Shape{150001, 180000, 4, 5000, 8, 12}, Shape{40000, 40000, 5, 500, 12, 13},
                      Shape{30011, 30011, 1, 777, 5, 11}};

}  // namespace

TEST_CASE("Binned accumulate equals the unbinned path bit for bit", "[count_sketch]") {
  Fixture f;
  const auto family = GENERATE(values(kBothFamilies));
  const Shape shape = GENERATE(values(kShapes));
  const bool sparse = GENERATE(false, true);
  const auto hash = MakeHash(shape.rows, shape.cols, shape.dim, family);
  const auto x = GaussianWithZeros(shape.n, 5, 0.2);
  auto initial = GaussianWithZeros(hash.cells(), 6, 0.5);  // accumulate adds to what is there,
  for (std::size_t c = 0; c < initial.size(); c += 3) {    // −0 cells included (adding +0 changes them)
    if (initial[c] == 0.0f) initial[c] = -0.0f;
  }
  const auto unbinned = f.Sketch(x, hash, initial, sparse, kDirect);
  const auto binned = f.Sketch(x, hash, initial, sparse, shape.Large());
  INFO("n " << shape.n << ", cols " << shape.cols << ", rows " << shape.rows << ", sparse " << sparse);
  CHECK(SameBits(binned, unbinned));
  CHECK_FALSE(SameBits(binned, initial));
  // And both agree with the definition to float rounding.
  auto naive = sketchps::testing::NaiveSketch(x, hash);
  double worst = 0.0;
  for (std::size_t c = 0; c < naive.size(); ++c) {
    worst = std::max(worst, std::fabs(double{naive[c]} + initial[c] - binned[c]));
  }
  CHECK(worst < 1e-2);
  CHECK(SameBits(f.Sketch(x, hash, initial, sparse, {}), unbinned));  // kAuto: too small to bin
}

TEST_CASE("Rows-outer estimates and recovery equal the direct ones bit for bit", "[count_sketch]") {
  Fixture f;
  const auto family = GENERATE(values(kBothFamilies));
  const Shape shape = GENERATE(values(kShapes));
  const auto hash = MakeHash(shape.rows, shape.cols, shape.dim, family);
  auto x = GaussianWithZeros(shape.n, 7, 0.1);
  for (std::size_t s = 0; s < 300; ++s) x[s * 97 % shape.n] = (s % 2 ? 30.0f : -30.0f) + 0.01f * s;
  const auto table = f.Sketch(x, hash, std::vector<float>(hash.cells(), 0.0f), false, kDirect);
  const auto on = shape.Large();
  const std::size_t n = shape.n - shape.n / 7;  // fewer coordinates than the dim: a ragged last item
  const auto unbinned = f.EstimateAll(table, hash, n, kDirect);
  const auto binned = f.EstimateAll(table, hash, n, on);
  INFO("n " << n << ", cols " << shape.cols << ", rows " << shape.rows);
  CHECK(SameBits(binned, unbinned));
  for (std::uint32_t i = 0; i < n; i += 101) REQUIRE(binned[i] == sketchps::testing::NaiveEstimate(table, hash, i));
  for (std::size_t k : {std::size_t{1}, std::size_t{250}, n / 3}) {  // sampled threshold, and the TopK fallback
    const auto want = f.Recover(table, hash, n, k, kDirect);
    const auto got = f.Recover(table, hash, n, k, on);
    CHECK(SameBits(got.first, want.first));
    CHECK(SameBits(got.second, want.second));
    CHECK(got.first.size() == k);
  }
}

TEST_CASE("Rows-outer recovery of clustered heavy hitters falls back and stays exact", "[count_sketch]") {
  // 5000 spikes packed into a few items overflow their candidate slots: the fallback path, binned.
  Fixture f;
  const std::size_t n = 1000003, k = 100;
  auto x = GaussianWithZeros(n, 9, 0.0);
  for (std::size_t s = 0; s < 5000; ++s) {
    x[70000 + 7 * s] = (s % 2 ? 1.0f : -1.0f) * (4000.0f + 16.0f * static_cast<float>(s * 37 % 5000));
  }
  const auto hash = MakeHash(5, 30000, n, CountSketchFamily::kPolynomial61);
  const auto table = f.Sketch(x, hash, std::vector<float>(hash.cells(), 0.0f), false, kDirect);
  const auto want = f.Recover(table, hash, n, k, kDirect);
  const auto got = f.Recover(table, hash, n, k, {Mode::kOn, 9, 14});
  CHECK(SameBits(got.first, want.first));
  CHECK(SameBits(got.second, want.second));
  std::vector<float> naive(n);
  for (std::uint32_t i = 0; i < n; ++i) naive[i] = sketchps::testing::NaiveEstimate(table, hash, i);
  CHECK(SameBits(got.first, sketchps::testing::NaiveTopKIndices(naive, k)));
}

TEST_CASE("The large-table orders switch on only for tables beyond L2", "[count_sketch]") {
  const auto shard = MakeHash(5, 11010, 110117, CountSketchFamily::kPolynomial61);  // a training job's shard
  CHECK(internal::PlanAccumulateBins(shard, 110117, {}).bins == 0);
  CHECK(internal::PlanRowsOuterItem(shard, 110117, {}) == 0);
  const auto large = MakeHash(5, 1u << 20, 100000000, CountSketchFamily::kPolynomial61);  // the bench at d = 100M
  CHECK(internal::PlanAccumulateBins(large, 50000000, {}).bins == 0);  // rows of 4 MiB: direct (measured faster)
  CHECK(internal::PlanRowsOuterItem(large, 100000000, {}) == std::size_t{1} << internal::kRowsOuterItemLog2);
  CHECK(internal::PlanRowsOuterItem(large, 1000, {}) == 0);
  CHECK(internal::PlanRowsOuterItem(MakeHash(64, 1u << 16, 1000000, CountSketchFamily::kPolynomial61), 1000000, {}) *
            64 <=
        internal::kRowsOuterMaxValues);
  const auto wide = MakeHash(5, 1u << 22, 1000000000, CountSketchFamily::kPolynomial61);
  const auto plan = internal::PlanAccumulateBins(wide, 500000000, {});
  CHECK(plan.bins == (1u << 22) >> internal::kBinColsLog2);
  CHECK(plan.capacity == (std::size_t{1} << internal::kBinColsLog2) / 16 * internal::kBinReuse);
  CHECK(internal::PlanAccumulateBins(wide, 1000, {}).bins == 0);  // too few entries to reuse a line
  CHECK(internal::PlanAccumulateBins(wide, 500000000, kDirect).bins == 0);
  CHECK(internal::PlanAccumulateBins(shard, 110117, {Mode::kOn, 6, 0}).bins == (11010 + 63) / 64);
  CHECK(internal::PlanRowsOuterItem(shard, 110117, {Mode::kOn, 0, 9}) == 512);
}

// Prints the direct and large-table times side by side (interleaved, min and median of 7);
// speed figures live in docs/reports/benchmarks.md. Run: sketchps_kernels_tests "Direct and large-table
// sketch timings (prints only)" (OMP_NUM_THREADS=1 or 2).
TEST_CASE("Direct and large-table sketch timings (prints only)", "[.bench]") {
  Fixture f;
  // The bench's sizing (c = 10k, density 0.001), and wider rows at d = 25.6M.
  const auto shape = GENERATE(std::make_pair(1000000u, 10000u), std::make_pair(10000000u, 100000u),
                              std::make_pair(25600000u, 256000u), std::make_pair(100000000u, 1000000u),
                              std::make_pair(25600000u, 1000000u), std::make_pair(25600000u, 4000000u));
  const std::uint64_t d = shape.first;
  const std::uint32_t cols = shape.second;
  const auto hash = MakeHash(5, cols, d, CountSketchFamily::kPolynomial61);
  sk::DeviceArray<float> x(GaussianWithZeros(d, 1, 0.0)), table(hash.cells()), val(d / 1000);
  sk::DeviceArray<std::uint32_t> idx(d / 1000);
  std::vector<double> times[2][2];
  for (int rep = 0; rep < 7; ++rep) {
    for (int large = 0; large < 2; ++large) {
      const internal::SketchBinning binning{large ? Mode::kOn : Mode::kOff, 0, 0};
      table.Zero();
      auto t0 = std::chrono::steady_clock::now();
      REQUIRE(internal::SketchAccumulateWith(x.data(), d, hash, table.data(), f.exec, binning).ok());
      times[large][0].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
      t0 = std::chrono::steady_clock::now();
      REQUIRE(
          internal::SketchRecoverWith(table.data(), hash, d, d / 1000, idx.data(), val.data(), f.exec, binning).ok());
      times[large][1].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
    }
  }
  for (int large = 0; large < 2; ++large) {
    for (auto& t : times[large]) std::sort(t.begin(), t.end());
    WARN("d = " << d << ", c = " << cols << (large ? " large-table" : " direct") << ": accumulate min "
                << times[large][0][0] << " median " << times[large][0][3] << " ms, recover min " << times[large][1][0]
                << " median " << times[large][1][3] << " ms");
  }
}
