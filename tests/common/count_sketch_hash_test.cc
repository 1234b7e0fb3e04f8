#include "common/count_sketch_hash.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <boost/math/distributions/chi_squared.hpp>
#include <catch2/catch.hpp>

#include "support/sketch_reference.h"

using sketchps::CountSketchFamily;
using sketchps::CountSketchHash;
using sketchps::CountSketchParams;

namespace {

CountSketchHash MakeHash(std::uint32_t rows, std::uint32_t cols, std::uint64_t seed, std::uint64_t dim,
                         CountSketchFamily family) {
  auto hash = CountSketchHash::Create({rows, cols, seed, dim, family});
  REQUIRE(hash.ok());
  return *hash;
}

// Coordinates to probe: small, large (near 2^32) and pseudo-random ones.
std::vector<std::uint32_t> ProbeCoordinates() {
  std::vector<std::uint32_t> out = {0, 1, 2, 3, 1000, 65535, 65536, 0x7FFFFFFFu, 0xFFFFFFFEu, 0xFFFFFFFFu};
  std::mt19937 rng(5);
  for (int t = 0; t < 2000; ++t) out.push_back(rng());
  return out;
}

void CheckRejected(const CountSketchParams& params, const std::string& field) {
  const absl::Status status = params.Validate();
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), Catch::Contains("CountSketchParams." + field));
  CHECK(CountSketchHash::Create(params).status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace

TEST_CASE("CountSketchParams::Validate names the offending field", "[count_sketch_hash]") {
  const CountSketchParams good{5, 1000, 42, 100000, CountSketchFamily::kPolynomial61};
  CHECK(good.Validate().ok());
  CHECK(CountSketchParams{64, 1, 0, (std::uint64_t{1} << 32) - 1}.Validate().ok());
  CHECK(CountSketchParams{1, 1 << 28, 0, 0}.Validate().ok());  // exactly the cell limit; dim 0 is legal
  auto bad = good;
  bad.rows = 0;
  CheckRejected(bad, "rows");
  bad.rows = 65;
  CheckRejected(bad, "rows");
  bad = good;
  bad.cols = 0;
  CheckRejected(bad, "cols");
  bad.rows = 2;
  bad.cols = 1u << 28;  // 2^29 cells
  CheckRejected(bad, "cols");
  bad = good;
  bad.dim = std::uint64_t{1} << 32;
  CheckRejected(bad, "dim");
  bad = good;
  bad.family = static_cast<CountSketchFamily>(7);
  CheckRejected(bad, "family");
}

TEST_CASE("kPolynomial61 equals an independent 128-bit evaluation of the documented family", "[count_sketch_hash]") {
  const std::uint64_t seed = GENERATE(0ull, 42ull, 0xFFFFFFFFFFFFFFFFull);
  const std::uint32_t cols = GENERATE(1u, 2u, 7u, 1000u, 262144u, (1u << 28) / 5);
  const auto hash = MakeHash(5, cols, seed, (std::uint64_t{1} << 32) - 1, CountSketchFamily::kPolynomial61);
  const auto naive = sketchps::testing::NaivePolyRows(seed, 5);
  for (std::uint32_t j = 0; j < 5; ++j) {
    for (std::uint32_t i : ProbeCoordinates()) {
      REQUIRE(hash.Bucket(j, i) == sketchps::testing::NaivePolyBucket(naive[j], cols, i));
      REQUIRE(hash.Sign(j, i) == sketchps::testing::NaivePolySign(naive[j], i));
    }
  }
}

TEST_CASE("Walks over consecutive coordinates equal the direct evaluation", "[count_sketch_hash]") {
  const std::uint32_t cols = GENERATE(1u, 3u, 1000u, 262144u);
  const std::uint32_t start = GENERATE(0u, 1u, 123456789u, 0xFFFFFFFFu - 5000u);
  const auto poly = MakeHash(3, cols, 17, (std::uint64_t{1} << 32) - 1, CountSketchFamily::kPolynomial61);
  const auto mix = MakeHash(3, cols, 17, (std::uint64_t{1} << 32) - 1, CountSketchFamily::kSplitMix64);
  for (std::uint32_t j = 0; j < 3; ++j) {
    sketchps::CountSketchPolyWalk pw(poly.PolyRow(j), start);
    sketchps::CountSketchMixWalk mw(mix.MixRow(j), start);
    for (std::uint32_t i = start; i - start <= 5000; ++i, pw.Next(), mw.Next()) {
      REQUIRE(pw.Bucket() == poly.Bucket(j, i));
      REQUIRE(pw.Positive() == (poly.Sign(j, i) > 0));
      REQUIRE(mw.Bucket() == mix.Bucket(j, i));
      REQUIRE(mw.Positive() == (mix.Sign(j, i) > 0));
    }
  }
}

TEST_CASE("CountSketchLowerMedian is the lower median for every row count", "[count_sketch_hash]") {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(-3, 3);  // many ties
  for (std::uint32_t r = 1; r <= 64; ++r) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> v(2 * r, 99.0f);  // stride 2: the odd slots must be ignored
      std::vector<float> values(r);
      for (std::uint32_t a = 0; a < r; ++a) v[2 * a] = values[a] = static_cast<float>(small(rng));
      std::sort(values.begin(), values.end());
      REQUIRE(sketchps::CountSketchLowerMedian(v.data(), 2, r) == values[(r - 1) / 2]);
    }
  }
  const float neg_zero[3] = {-0.0f, -0.0f, -0.0f};
  CHECK_FALSE(std::signbit(sketchps::CountSketchLowerMedian(neg_zero, 1, 3)));
}

TEST_CASE("Hashes are pinned: the same params give the same buckets in every build", "[count_sketch_hash]") {
  // Golden values: a change here breaks compatibility between nodes running different builds.
  const auto poly = MakeHash(3, 1000, 42, 1 << 20, CountSketchFamily::kPolynomial61);
  const auto mix = MakeHash(3, 1000, 42, 1 << 20, CountSketchFamily::kSplitMix64);
  std::vector<int> got;
  for (std::uint32_t j = 0; j < 3; ++j) {
    for (std::uint32_t i : {0u, 1u, 999999u}) {
      got.push_back(static_cast<int>(poly.Bucket(j, i)) * poly.Sign(j, i));
      got.push_back(static_cast<int>(mix.Bucket(j, i)) * mix.Sign(j, i));
    }
  }
  // Pairs (polynomial, splitmix) of bucket·sign for rows 0..2 and i = 0, 1, 999999.
  const std::vector<int> golden = {135, -879, -539, 38,   715, -543, -400, -984, -892,
                                   995, 544,  -184, -696, 223, 63,   -946, 192,  -900};
  CHECK(got == golden);
}

TEST_CASE("Identical params give identical hashes, different seeds differ", "[count_sketch_hash]") {
  const auto family = GENERATE(CountSketchFamily::kPolynomial61, CountSketchFamily::kSplitMix64);
  const auto a = MakeHash(5, 5000, 7, 1 << 20, family);
  const auto b = MakeHash(5, 5000, 7, 1 << 20, family);
  const auto c = MakeHash(5, 5000, 8, 1 << 20, family);
  CHECK(a.params().seed == 7);
  CHECK(a.params().family == family);
  std::size_t same_bucket = 0, same_sign = 0, probes = 0;
  for (std::uint32_t j = 0; j < 5; ++j) {
    for (std::uint32_t i : ProbeCoordinates()) {
      REQUIRE(a.Bucket(j, i) == b.Bucket(j, i));
      REQUIRE(a.Sign(j, i) == b.Sign(j, i));
      same_bucket += a.Bucket(j, i) == c.Bucket(j, i);
      same_sign += a.Sign(j, i) == c.Sign(j, i);
      ++probes;
    }
  }
  CHECK(same_bucket < probes / 100);  // ~1/5000 expected
  CHECK(std::fabs(static_cast<double>(same_sign) / probes - 0.5) < 0.05);
}

TEST_CASE("Buckets are uniform and signs balanced, on dense and strided coordinates", "[count_sketch_hash]") {
  const auto family = GENERATE(CountSketchFamily::kPolynomial61, CountSketchFamily::kSplitMix64);
  const std::uint32_t stride = GENERATE(1u, 1000u, 40000u);
  const std::uint32_t cols = 97;
  const std::uint32_t n = 100000;
  const auto hash = MakeHash(4, cols, 11, (std::uint64_t{1} << 32) - 1, family);
  // chi-square with cols − 1 degrees of freedom; a fixed seed, so a 1e-6 tail bound never flakes.
  const double chi2_bound = boost::math::quantile(boost::math::chi_squared(cols - 1), 1.0 - 1e-6);
  for (std::uint32_t j = 0; j < 4; ++j) {
    std::vector<double> counts(cols, 0.0);
    double sign_sum = 0.0, neighbour_agree = 0.0;
    for (std::uint32_t t = 0; t < n; ++t) {
      const std::uint32_t i = t * stride;
      counts[hash.Bucket(j, i)] += 1.0;
      sign_sum += hash.Sign(j, i);
      neighbour_agree += hash.Sign(j, i) == hash.Sign(j, i + 1);
    }
    const double expected = static_cast<double>(n) / cols;
    double chi2 = 0.0;
    for (double c : counts) chi2 += (c - expected) * (c - expected) / expected;
    CHECK(chi2 < chi2_bound);
    CHECK(std::fabs(sign_sum) < 5.0 * std::sqrt(n));                         // 5 standard deviations of a fair ±1 sum
    CHECK(std::fabs(neighbour_agree / n - 0.5) < 5.0 * 0.5 / std::sqrt(n));  // s(i), s(i+1) uncorrelated
  }
}

TEST_CASE("CountSketchHash is a plain value: copies hash identically", "[count_sketch_hash]") {
  const auto hash = MakeHash(64, 3, 99, 1000, CountSketchFamily::kPolynomial61);
  CountSketchHash copy;
  CHECK(copy.rows() == 0);
  copy = hash;
  for (std::uint32_t j = 0; j < 64; ++j) {
    for (std::uint32_t i = 0; i < 1000; ++i) {
      REQUIRE(copy.Bucket(j, i) == hash.Bucket(j, i));
      REQUIRE(copy.Bucket(j, i) < 3);
    }
  }
}
