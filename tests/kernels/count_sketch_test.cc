// Count Sketch kernels against naive host references (docs/methods.md, decision 3).
#include "kernels/count_sketch.h"

#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/select.h"
#include "support/reference.h"
#include "support/sketch_reference.h"

namespace sk = sketchps::kernels;
using sketchps::CountSketchFamily;
using sketchps::CountSketchHash;
using sketchps::testing::NaiveEstimate;
using sketchps::testing::NaiveSketch;

namespace {

CountSketchHash MakeHash(std::uint32_t rows, std::uint32_t cols, std::uint64_t seed, std::uint64_t dim,
                         CountSketchFamily family = CountSketchFamily::kPolynomial61) {
  auto hash = CountSketchHash::Create({rows, cols, seed, dim, family});
  REQUIRE(hash.ok());
  return *hash;
}

struct Fixture {
  sk::Scratch scratch;
  sk::Exec exec{nullptr, &scratch};

  std::vector<float> Sketch(const std::vector<float>& x, const CountSketchHash& hash) {
    sk::DeviceArray<float> d_x(x);
    sk::DeviceArray<float> table(hash.cells());
    table.Zero();
    REQUIRE(sk::SketchAccumulate(d_x.data(), x.size(), hash, table.data(), exec).ok());
    return table.ToHost();
  }
  std::vector<float> EstimateAll(const std::vector<float>& table, const CountSketchHash& hash, std::size_t n) {
    sk::DeviceArray<float> d_table(table);
    sk::DeviceArray<float> est(n);
    REQUIRE(sk::SketchEstimateAll(d_table.data(), hash, n, est.data(), exec).ok());
    return est.ToHost();
  }
  std::vector<std::uint32_t> Recover(const std::vector<float>& table, const CountSketchHash& hash, std::size_t n,
                                     std::size_t k, std::vector<float>* est = nullptr) {
    sk::DeviceArray<float> d_table(table);
    sk::DeviceArray<std::uint32_t> idx(std::max<std::size_t>(k, 1));
    sk::DeviceArray<float> val(std::max<std::size_t>(k, 1));
    auto count = sk::SketchRecover(d_table.data(), hash, n, k, idx.data(), val.data(), exec);
    REQUIRE(count.ok());
    if (est != nullptr) *est = val.ToHost(*count);
    return idx.ToHost(*count);
  }
  double L2(const std::vector<float>& table, const CountSketchHash& hash) {
    sk::DeviceArray<float> d_table(table);
    auto l2 = sk::SketchL2Estimate(d_table.data(), hash.rows(), hash.cols(), exec);
    REQUIRE(l2.ok());
    return *l2;
  }
};

// Small integers: sums of them are exact in float, so every accumulation order gives one table.
std::vector<float> IntegerVector(std::size_t n, std::uint64_t seed, double zero_fraction = 0.1) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> value(-8, 8);
  std::bernoulli_distribution zero(zero_fraction);
  std::vector<float> x(n);
  for (auto& v : x) v = zero(rng) ? 0.0f : static_cast<float>(value(rng));
  return x;
}

std::vector<float> Gaussian(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng);
  return x;
}

// Largest |a − b| relative to the largest |a|, |b| (1 when both are zero vectors and differ).
double MaxRelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, scale = 1e-30;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::max(std::fabs(a[i]), std::fabs(b[i]))));
  }
  return diff / scale;
}

const auto kBothFamilies = {CountSketchFamily::kPolynomial61, CountSketchFamily::kSplitMix64};

}  // namespace

TEST_CASE("Accumulate equals the naive sketch exactly on integer inputs, on every code path", "[count_sketch]") {
  Fixture f;
  const auto family = GENERATE(values(kBothFamilies));
  // (n, cols): many entries into a small table (private tables on the CPU backend), more entries
  // than one CPU sweep chunk (2^20) per thread, few entries into a large table (atomic adds), and
  // fewer entries than one batch.
  const auto shape = GENERATE(std::make_pair(200000u, 3000u), std::make_pair(2500000u, 3000u),
                              std::make_pair(1000u, 100000u), std::make_pair(77u, 50u));
  const std::uint32_t rows = GENERATE(1u, 5u);
  const auto hash = MakeHash(rows, shape.second, 3, shape.first, family);
  const auto x = IntegerVector(shape.first, 17);
  const auto table = f.Sketch(x, hash);
  CHECK(table == NaiveSketch(x, hash));
  CHECK(f.Sketch(x, MakeHash(rows, shape.second, 3, shape.first, family)) == table);  // same params, same table
  if (shape.first > 1000) CHECK(f.Sketch(x, MakeHash(rows, shape.second, 4, shape.first, family)) != table);
}

TEST_CASE("Accumulate adds to the table, zeros leave it unchanged", "[count_sketch]") {
  Fixture f;
  const auto hash = MakeHash(5, 1000, 1, 50000);
  sk::DeviceArray<float> table(hash.cells());
  table.Zero();
  CHECK(table.ToHost() == std::vector<float>(hash.cells(), 0.0f));
  sk::DeviceArray<float> zeros(std::vector<float>(50000, 0.0f));
  REQUIRE(sk::SketchAccumulate(zeros.data(), 50000, hash, table.data(), f.exec).ok());
  CHECK(table.ToHost() == std::vector<float>(hash.cells(), 0.0f));
  const auto x = IntegerVector(50000, 2);
  sk::DeviceArray<float> d_x(x);
  REQUIRE(sk::SketchAccumulate(d_x.data(), x.size(), hash, table.data(), f.exec).ok());
  REQUIRE(sk::SketchAccumulate(d_x.data(), x.size(), hash, table.data(), f.exec).ok());
  auto twice = NaiveSketch(x, hash);
  for (auto& v : twice) v *= 2.0f;
  CHECK(table.ToHost() == twice);
  table.Zero();  // zero() restores zeros
  CHECK(table.ToHost() == std::vector<float>(hash.cells(), 0.0f));
}

TEST_CASE("A one-hot vector with one column gives one value of magnitude 1 per row", "[count_sketch]") {
  Fixture f;
  const auto family = GENERATE(values(kBothFamilies));
  const std::uint32_t hot = GENERATE(0u, 3u, 9999u);
  const auto hash = MakeHash(7, 1, 5, 10000, family);
  std::vector<float> x(10000, 0.0f);
  x[hot] = 1.0f;
  const auto table = f.Sketch(x, hash);
  for (std::uint32_t j = 0; j < 7; ++j) CHECK(table[j] == static_cast<float>(hash.Sign(j, hot)));
  for (float v : table) CHECK(std::fabs(v) == 1.0f);
}

TEST_CASE("Collision-free params recover the input exactly", "[count_sketch]") {
  Fixture f;
  const auto family = GENERATE(values(kBothFamilies));
  const auto hash = MakeHash(20, 10000, GENERATE(1u, 2u, 3u), 5, family);
  for (std::uint32_t j = 0; j < 20; ++j) {  // precondition: no two coordinates share a bucket
    for (std::uint32_t a = 0; a < 5; ++a)
      for (std::uint32_t b = a + 1; b < 5; ++b) REQUIRE(hash.Bucket(j, a) != hash.Bucket(j, b));
  }
  const std::vector<float> x = {1.5f, -2.0f, 3.25f, 0.5f, -7.0f};
  const auto table = f.Sketch(x, hash);
  std::vector<float> est;
  const auto idx = f.Recover(table, hash, 5, 5, &est);
  CHECK(idx == std::vector<std::uint32_t>{4, 2, 1, 0, 3});  // unSketch(k = d), rank order
  for (std::size_t t = 0; t < idx.size(); ++t) CHECK(est[t] == x[idx[t]]);
  CHECK(f.EstimateAll(table, hash, 5) == x);
  const double norm = std::sqrt(1.5 * 1.5 + 2.0 * 2.0 + 3.25 * 3.25 + 0.5 * 0.5 + 7.0 * 7.0);
  const double l2 = f.L2(table, hash);
  CHECK(std::fabs(l2 - norm) < 1e-4);
  // unSketch(eps = 0.9·min|x| / ||x||): threshold eps·l2 keeps every coordinate, exactly.
  sk::DeviceArray<float> d_est(f.EstimateAll(table, hash, 5));
  sk::DeviceArray<std::uint32_t> sel_idx(5);
  sk::DeviceArray<float> sel_val(5);
  const auto tau = static_cast<float>(0.9 * 0.5 / norm * l2);
  auto selected = sk::ThresholdSelect(d_est.data(), 5, tau, 5, sel_idx.data(), sel_val.data(), f.exec);
  REQUIRE(selected.ok());
  CHECK(sel_val.ToHost(*selected) == x);
}

TEST_CASE("Merged sketches of the basis vectors unsketch to all ones", "[count_sketch]") {
  Fixture f;
  const auto family = GENERATE(values(kBothFamilies));
  const auto hash = MakeHash(20, 10000, 9, 5, family);
  sk::DeviceArray<float> sum(std::vector<float>(hash.cells(), 0.0f));
  for (std::uint32_t b = 0; b < 5; ++b) {
    std::vector<float> e(5, 0.0f);
    e[b] = 1.0f;
    sk::DeviceArray<float> part(f.Sketch(e, hash));
    REQUIRE(sk::SketchMerge(sum.data(), part.data(), hash.cells(), f.exec).ok());
  }
  CHECK(f.EstimateAll(sum.ToHost(), hash, 5) == std::vector<float>(5, 1.0f));
}

TEST_CASE("Merge is an exact elementwise sum", "[count_sketch]") {
  Fixture f;
  const auto a = Gaussian(100003, 1);
  const auto b = Gaussian(100003, 2);
  sk::DeviceArray<float> d_a(a), d_b(b);
  REQUIRE(sk::SketchMerge(d_a.data(), d_b.data(), a.size(), f.exec).ok());
  const auto got = d_a.ToHost();
  for (std::size_t c = 0; c < a.size(); ++c) REQUIRE(got[c] == a[c] + b[c]);
}

TEST_CASE("Sketches are linear: S(x) + S(y) equals S(x + y)", "[count_sketch]") {
  Fixture f;
  const auto family = GENERATE(values(kBothFamilies));
  const auto hash = MakeHash(5, 2000, 21, 60000, family);
  const auto x = Gaussian(60000, 3);
  const auto y = Gaussian(60000, 4);
  std::vector<float> xy(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) xy[i] = x[i] + y[i];
  sk::DeviceArray<float> sx(f.Sketch(x, hash)), sy(f.Sketch(y, hash));
  REQUIRE(sk::SketchMerge(sx.data(), sy.data(), hash.cells(), f.exec).ok());
  const auto sum = sx.ToHost();
  const auto direct = f.Sketch(xy, hash);
  CHECK(MaxRelDiff(sum, direct) < 1e-5);
  CHECK(MaxRelDiff(direct, NaiveSketch(xy, hash)) < 1e-5);
}

TEST_CASE("Sparse accumulate equals dense accumulate", "[count_sketch]") {
  Fixture f;
  const auto family = GENERATE(values(kBothFamilies));
  const std::uint32_t cols = GENERATE(500u, 200000u);
  const auto hash = MakeHash(5, cols, 8, 100000, family);
  const auto x = IntegerVector(100000, 6, 0.7);
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
  for (std::uint32_t i = 0; i < x.size(); ++i) {
    if (x[i] == 0.0f) continue;
    if (i % 3 == 0) {  // split some entries into duplicates: they must add up
      idx.push_back(i);
      val.push_back(x[i] - 1.0f);
      idx.push_back(i);
      val.push_back(1.0f);
    } else {
      idx.push_back(i);
      val.push_back(x[i]);
    }
  }
  sk::DeviceArray<std::uint32_t> d_idx(idx);
  sk::DeviceArray<float> d_val(val);
  sk::DeviceArray<float> table(std::vector<float>(hash.cells(), 0.0f));
  REQUIRE(sk::SketchAccumulateSparse(d_idx.data(), d_val.data(), idx.size(), hash, table.data(), f.exec).ok());
  CHECK(table.ToHost() == f.Sketch(x, hash));
}

TEST_CASE("Estimates equal the naive lower median for every row count", "[count_sketch]") {
  Fixture f;
  const auto family = GENERATE(values(kBothFamilies));
  const std::uint32_t rows = GENERATE(1u, 2u, 3u, 4u, 5u, 6u, 7u, 64u);
  const auto hash = MakeHash(rows, 50, 12, 3000, family);
  auto x = IntegerVector(3000, 13, 0.0);
  for (auto& v : x) v = std::round(v / 4.0f);  // many ties among the row values
  const auto table = f.Sketch(x, hash);
  const auto est = f.EstimateAll(table, hash, 3000);
  for (std::uint32_t i = 0; i < 3000; ++i) REQUIRE(est[i] == NaiveEstimate(table, hash, i));
  std::vector<std::uint32_t> probe = {2999, 0, 17, 17, 1234};
  sk::DeviceArray<std::uint32_t> d_probe(probe);
  sk::DeviceArray<float> d_table(table), out(probe.size());
  REQUIRE(sk::SketchEstimate(d_table.data(), hash, d_probe.data(), probe.size(), out.data(), f.exec).ok());
  const auto got = out.ToHost();
  for (std::size_t t = 0; t < probe.size(); ++t) CHECK(got[t] == est[probe[t]]);
  CHECK(f.L2(table, hash) == sketchps::testing::NaiveL2Estimate(table, rows, 50));
}

TEST_CASE("Recover returns the top-k estimates, ties by index", "[count_sketch]") {
  Fixture f;
  const auto hash = MakeHash(3, 40, 2, 5000, CountSketchFamily::kSplitMix64);
  const auto table = f.Sketch(IntegerVector(5000, 7), hash);
  const auto est = f.EstimateAll(table, hash, 5000);
  std::vector<float> got_est;
  const auto got = f.Recover(table, hash, 5000, 300, &got_est);
  CHECK(got == sketchps::testing::NaiveTopKIndices(est, 300));
  for (std::size_t t = 0; t < got.size(); ++t) CHECK(got_est[t] == est[got[t]]);
  CHECK(f.Recover(table, hash, 4000, 10) == sketchps::testing::NaiveTopKIndices({est.begin(), est.begin() + 4000}, 10));
  CHECK(f.Recover(table, hash, 5000, 0).empty());
}

TEST_CASE("Recover on a small range (the sampled rank beyond the sample) is exact", "[count_sketch]") {
  // n = 8, k = 1: the sampled pass would ask for rank 13 of 8 samples; it must take the exact path.
  Fixture f;
  for (std::size_t n : {5u, 8u, 20u}) {
    const auto hash = MakeHash(5, 4, 7, n);
    const auto table = f.Sketch(IntegerVector(n, 3), hash);
    const auto est = f.EstimateAll(table, hash, n);
    INFO("n = " << n);
    CHECK(f.Recover(table, hash, n, 1) == sketchps::testing::NaiveTopKIndices(est, 1));
  }
}

TEST_CASE("Recover over many work items equals the naive top-k, spread or clustered", "[count_sketch]") {
  // n spans 16 estimate work items on the CPU and is not a multiple of the 8 hash lanes. Spread
  // spikes take the sampled-threshold pass; 5000 spikes packed into one work item hold more
  // candidates than its slots, which must fall back to estimating everything. Integer values tie.
  Fixture f;
  const bool clustered = GENERATE(false, true);
  const std::uint32_t rows = GENERATE(5u, 4u);
  const std::size_t n = 1000003, k = 100;
  auto x = IntegerVector(n, 31, 0.0);
  for (std::size_t s = 0; s < 5000; ++s) {
    const float magnitude = 4000.0f + 16.0f * static_cast<float>(s * 37 % 5000);  // order unrelated to position
    x[clustered ? 70000 + 7 * s : s * 199] = (s % 2 ? 1.0f : -1.0f) * magnitude;
  }
  const auto hash = MakeHash(rows, 30000, 5, n);
  const auto table = f.Sketch(x, hash);
  std::vector<float> naive(n);
  for (std::uint32_t i = 0; i < n; ++i) naive[i] = NaiveEstimate(table, hash, i);
  CHECK(f.EstimateAll(table, hash, n) == naive);
  std::vector<float> got_est;
  const auto got = f.Recover(table, hash, n, k, &got_est);
  REQUIRE(got == sketchps::testing::NaiveTopKIndices(naive, k));
  for (std::size_t t = 0; t < got.size(); ++t) CHECK(got_est[t] == naive[got[t]]);
}

TEST_CASE("Planted heavy hitters are recovered, equally well by both families", "[count_sketch]") {
  Fixture f;
  // Spec test 8: r = 5, c = 20000, d = 200k noise N(0,1) + 50 spikes: recall >= 0.9 per trial.
  // Project decision 3: the fast family's recall must equal the specified family's; compared on
  // a harder setting (c = 4000, where recall is below 1) over 8 trials, on Gaussian and blocky noise.
  const bool blocky = GENERATE(false, true);
  const std::uint32_t cols = GENERATE(20000u, 4000u);
  double recall[2] = {0.0, 0.0};
  const int trials = 8;
  for (int trial = 0; trial < trials; ++trial) {
    const auto planted = sketchps::testing::PlantSpikes(200000, 50, 20.0f, 40.0f, 1000 + trial, blocky);
    for (int fam = 0; fam < 2; ++fam) {
      const auto hash = MakeHash(5, cols, 77 + trial, 200000,
                                 fam ? CountSketchFamily::kSplitMix64 : CountSketchFamily::kPolynomial61);
      const auto top = f.Recover(f.Sketch(planted.x, hash), hash, 200000, 50);
      std::size_t hits = 0;
      for (std::uint32_t s : planted.spikes) hits += std::count(top.begin(), top.end(), s);
      const double r = hits / 50.0;
      if (cols == 20000) CHECK(r >= 0.9);
      recall[fam] += r / trials;
    }
  }
  INFO("recall polynomial " << recall[0] << ", splitmix " << recall[1] << ", cols " << cols << ", blocky " << blocky);
  CHECK(recall[0] >= (cols == 20000 ? 0.98 : 0.8));
  CHECK(std::fabs(recall[0] - recall[1]) <= 0.04);
}

TEST_CASE("Sketch kernels reject bad arguments with a message naming them", "[count_sketch]") {
  Fixture f;
  const auto hash = MakeHash(5, 100, 1, 1000);
  sk::DeviceArray<float> table(std::vector<float>(hash.cells(), 0.0f)), x(std::vector<float>(2000, 1.0f));
  sk::DeviceArray<std::uint32_t> idx(std::vector<std::uint32_t>{5, 1000});
  auto expect = [](const absl::Status& s, const std::string& word) {
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(s.message()), Catch::Contains(word));
  };
  expect(sk::SketchAccumulate(x.data(), 1001, hash, table.data(), f.exec), "n = 1001");
  expect(sk::SketchAccumulate(nullptr, 10, hash, table.data(), f.exec), "d_x");
  expect(sk::SketchAccumulate(x.data(), 10, hash, nullptr, f.exec), "d_table");
  expect(sk::SketchAccumulate(x.data(), 10, CountSketchHash(), table.data(), f.exec), "hash");
  expect(sk::SketchAccumulate(x.data(), 10, hash, table.data(), sk::Exec{}), "exec.scratch");
  expect(sk::SketchAccumulateSparse(idx.data(), x.data(), 2, hash, table.data(), f.exec), "d_idx");
  expect(sk::SketchAccumulateSparse(idx.data(), nullptr, 1, hash, table.data(), f.exec), "d_val");
  expect(sk::SketchEstimate(table.data(), hash, idx.data(), 2, x.data(), f.exec), "d_idx");
  expect(sk::SketchEstimateAll(table.data(), hash, 1001, x.data(), f.exec), "n = 1001");
  expect(sk::SketchMerge(table.data(), nullptr, 10, f.exec), "d_src");
  expect(sk::SketchRecover(table.data(), hash, 1000, 5, nullptr, x.data(), f.exec).status(), "d_out_idx");
  expect(sk::SketchL2Estimate(table.data(), 0, 100, f.exec).status(), "rows");
  expect(sk::SketchL2Estimate(table.data(), 5, 0, f.exec).status(), "cols");
  CHECK(sk::SketchAccumulateSparse(idx.data(), x.data(), 1, hash, table.data(), f.exec).ok());  // idx 5 is fine
}

TEST_CASE("Sketch kernels do not allocate once the scratch is warm", "[count_sketch]") {
  Fixture f;
  const auto hash = MakeHash(5, 1000, 1, 100000);
  sk::DeviceArray<float> x(Gaussian(100000, 1)), table(hash.cells());
  sk::DeviceArray<std::uint32_t> idx(100);
  sk::DeviceArray<float> val(100);
  auto round = [&] {
    table.Zero();
    REQUIRE(sk::SketchAccumulate(x.data(), 100000, hash, table.data(), f.exec).ok());
    REQUIRE(sk::SketchRecover(table.data(), hash, 100000, 100, idx.data(), val.data(), f.exec).ok());
  };
  round();
  const auto allocations = f.scratch.SystemAllocations();
  round();
  CHECK(f.scratch.SystemAllocations() == allocations);
}

// Benchmark target (CPU backend, 2 OpenMP threads): accumulate <= 15x and recover <= 20x one
// streaming pass over the same vector. Run: sketchps_kernels_tests "[.bench]" (OMP_NUM_THREADS=2).
TEST_CASE("Sketch timings at d = 25.6M against a streaming pass (prints only)", "[.bench]") {
  Fixture f;
  const std::size_t d = 25600000, k = d / 1000;
  const auto host = Gaussian(d, 1);
  sk::DeviceArray<float> x(host);
  auto best_ms = [](auto&& fn) {
    double best = 1e30;
    for (int rep = 0; rep < 7; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best * 1e3;
  };
  // Streaming passes: a Thrust count_if over |x| (kernels::CountAbove) and an OpenMP sum of |x|.
  const double count_pass = best_ms([&] { REQUIRE(sk::CountAbove(x.data(), d, 1.0f, f.exec).ok()); });
  volatile double sink = 0.0;
  const double sum_pass = best_ms([&] {
    double s = 0.0;
#pragma omp parallel for reduction(+ : s)
    for (std::size_t i = 0; i < d; ++i) s += std::fabs(host[i]);
    sink = s;
  });
  const double stream = std::min(count_pass, sum_pass);
  WARN("d = " << d << ", threads = " << sk::BackendParallelism() << ": count_if pass " << count_pass
              << " ms, sum|x| pass " << sum_pass << " ms");
  for (std::uint32_t cols : {65536u, 262144u}) {
    for (auto family : kBothFamilies) {
      const auto hash = MakeHash(5, cols, 42, d, family);
      sk::DeviceArray<float> table(hash.cells()), val(k);
      sk::DeviceArray<std::uint32_t> idx(k);
      const double acc = best_ms([&] { REQUIRE(sk::SketchAccumulate(x.data(), d, hash, table.data(), f.exec).ok()); });
      const double rec =
          best_ms([&] { REQUIRE(sk::SketchRecover(table.data(), hash, d, k, idx.data(), val.data(), f.exec).ok()); });
      WARN("r = 5, c = " << cols << ", family " << static_cast<int>(family) << ": accumulate " << acc << " ms ("
                         << acc / stream << "x), recover k = " << k << " " << rec << " ms (" << rec / stream << "x)");
    }
  }
}
