#include "kernels/dgc.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "common/splitmix.h"
#include "kernels/vector_ops.h"
#include "support/reference.h"
#include "support/sparse_reference.h"

namespace sk = sketchps::kernels;
using sketchps::SplitMix64;
using sketchps::testing::Gaussian;
using sketchps::testing::StudentT3;
using sketchps::testing::TiedGaussian;

namespace {

struct Selected {
  sk::DgcSelection info;
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
};

Selected RunDgc(const std::vector<float>& v, const sk::DgcSelectOptions& options, std::uint64_t seed,
                sk::Scratch& scratch) {
  sk::DeviceArray<float> d_v(v);
  const auto cap = sk::DgcCapacity(v.size(), options);
  REQUIRE(cap.ok());
  sk::DeviceArray<std::uint32_t> d_idx(std::max<std::size_t>(*cap, 1));
  sk::DeviceArray<float> d_val(std::max<std::size_t>(*cap, 1));
  auto r =
      sk::DgcSelect(d_v.data(), v.size(), options, seed, d_idx.data(), d_val.data(), *cap, sk::Exec{nullptr, &scratch});
  REQUIRE(r.ok());
  REQUIRE(r->count <= *cap);
  return {*r, d_idx.ToHost(r->count), d_val.ToHost(r->count)};
}

float Importance(float x) { return std::isnan(x) ? 0.0f : std::fabs(x); }

std::vector<std::uint32_t> AtLeast(const std::vector<float>& v, float tau) {
  std::vector<std::uint32_t> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::fabs(v[i]) >= tau) out.push_back(static_cast<std::uint32_t>(i));
  }
  return out;
}

struct NaiveResult {
  std::vector<std::uint32_t> idx;
  float tau = 0.0f;
  int iters = 0;
  bool resampled = false;
};

// τ from the sample positions documented in dgc.h, by a full sort.
float NaiveSampledThreshold(const std::vector<float>& v, const sk::DgcPlan& plan, const sk::DgcSelectOptions& o,
                            std::uint64_t seed) {
  const std::size_t n = v.size();
  std::vector<float> samples;
  if (plan.num_samples == n) {
    for (float x : v) samples.push_back(Importance(x));
  } else if (o.strided_sample) {
    for (std::size_t i = SplitMix64(seed) % plan.stride; i < n; i += plan.stride) samples.push_back(Importance(v[i]));
  } else {
    for (std::size_t s = 0; s < plan.num_samples; ++s) samples.push_back(Importance(v[SplitMix64(seed + 1 + s) % n]));
  }
  std::sort(samples.begin(), samples.end(), std::greater<float>());
  return samples[plan.top_k_samples - 1];
}

// The reference code's _sparsify, transcribed loop by loop (plus dgc.h's overflow guard and
// truncation option).
NaiveResult NaiveDgc(const std::vector<float>& v, const sk::DgcPlan& plan, const sk::DgcSelectOptions& o,
                     std::uint64_t seed) {
  NaiveResult r;
  r.tau = NaiveSampledThreshold(v, plan, o, seed);
  const double k = static_cast<double>(plan.target);
  auto selected = AtLeast(v, r.tau);
  for (int it = 0; it < o.max_adaptation_iters; ++it) {
    const double c = static_cast<double>(selected.size());
    if (c > k) {
      if (c <= k * o.compress_upper_bound) break;
      if (o.resample) {
        r.resampled = true;
        break;
      }
      r.tau = r.tau * static_cast<float>(o.compress_upper_bound);
    } else if (c < o.compress_lower_bound * k) {
      r.tau = r.tau * static_cast<float>(o.compress_lower_bound);
    } else {
      break;
    }
    selected = AtLeast(v, r.tau);
    ++r.iters;
  }
  if (static_cast<double>(selected.size()) > k * o.compress_upper_bound) r.resampled = true;
  if (r.resampled) {  // exact top-k among the selected, literally
    std::vector<float> sel_val;
    for (auto i : selected) sel_val.push_back(v[i]);
    std::vector<std::uint32_t> top;
    for (auto p : sketchps::testing::NaiveTopKPositions(sel_val, plan.target)) top.push_back(selected[p]);
    std::sort(top.begin(), top.end());
    selected = top;
  }
  if (o.truncate_to_k && selected.size() > plan.target) selected.resize(plan.target);
  r.idx = selected;
  return r;
}

void CheckAgainstNaive(const std::vector<float>& v, const sk::DgcSelectOptions& o, std::uint64_t seed,
                       sk::Scratch& scratch, Selected* out = nullptr) {
  const auto plan = sk::PlanDgc(v.size(), o);
  REQUIRE(plan.ok());
  const Selected got = RunDgc(v, o, seed, scratch);
  const NaiveResult want = NaiveDgc(v, *plan, o, seed);
  REQUIRE(got.info.target == plan->target);
  CHECK(got.info.threshold == want.tau);
  CHECK(got.info.adaptation_iters == want.iters);
  CHECK(got.info.resampled == want.resampled);
  REQUIRE(got.idx == want.idx);
  for (std::size_t i = 0; i < got.idx.size(); ++i) REQUIRE(got.val[i] == v[got.idx[i]]);
  if (out != nullptr) *out = got;
}

}  // namespace

TEST_CASE("PlanDgc reproduces the reference code's sample plan", "[dgc]") {
  // Expected values computed with the reference's `initialize` arithmetic in Python.
  struct Row {
    std::size_t n;
    double ratio;
    sk::DgcPlan want;
  };
  const std::vector<Row> rows = {
      {1, 0.001, {1, 1, 1, 1}},
      {2000, 0.001, {2, 2000, 1, 2}},
      {2001, 0.001, {3, 2001, 1, 3}},
      {10000, 0.001, {10, 10000, 1, 10}},
      {1000000, 0.001, {1000, 10309, 97, 11}},
      {1000000, 0.01, {10000, 10309, 97, 104}},
      {25600000, 0.001, {25600, 263917, 97, 264}},
      {4096007, 0.01, {40961, 42226, 97, 423}},
      {300, 0.01, {3, 300, 1, 3}},
  };
  for (const auto& row : rows) {
    sk::DgcSelectOptions o;
    o.compress_ratio = row.ratio;
    const auto plan = sk::PlanDgc(row.n, o);
    REQUIRE(plan.ok());
    INFO("n = " << row.n << ", ratio = " << row.ratio);
    CHECK(plan->target == row.want.target);
    CHECK(plan->num_samples == row.want.num_samples);
    CHECK(plan->stride == row.want.stride);
    CHECK(plan->top_k_samples == row.want.top_k_samples);
  }
  sk::DgcSelectOptions all;
  all.sample_ratio = 1.0;
  const auto plan = sk::PlanDgc(1000000, all);
  REQUIRE(plan.ok());
  CHECK(plan->num_samples == 1000000);
  CHECK(plan->top_k_samples == 1000);
}

TEST_CASE("DgcSelectOptions validation names the field", "[dgc]") {
  using Mutator = void (*)(sk::DgcSelectOptions&);
  const std::vector<std::pair<const char*, Mutator>> cases = {
      {"compress_ratio", [](sk::DgcSelectOptions& o) { o.compress_ratio = 0.0; }},
      {"compress_ratio", [](sk::DgcSelectOptions& o) { o.compress_ratio = 1.5; }},
      {"compress_ratio", [](sk::DgcSelectOptions& o) { o.compress_ratio = std::nan(""); }},
      {"sample_ratio", [](sk::DgcSelectOptions& o) { o.sample_ratio = -0.1; }},
      {"compress_upper_bound", [](sk::DgcSelectOptions& o) { o.compress_upper_bound = 0.9; }},
      {"compress_lower_bound", [](sk::DgcSelectOptions& o) { o.compress_lower_bound = 1.2; }},
      {"compress_lower_bound", [](sk::DgcSelectOptions& o) { o.compress_lower_bound = 0.0; }},
      {"max_adaptation_iters", [](sk::DgcSelectOptions& o) { o.max_adaptation_iters = -1; }},
  };
  CHECK(sk::ValidateDgcSelectOptions(sk::DgcSelectOptions{}).ok());
  for (const auto& [field, mutate] : cases) {
    sk::DgcSelectOptions o;
    mutate(o);
    const auto status = sk::ValidateDgcSelectOptions(o);
    INFO(field);
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(status.message().find(field) != std::string::npos);
    sk::Scratch scratch;
    float v = 1.0f;
    std::uint32_t idx = 0;
    CHECK(sk::DgcSelect(&v, 1, o, 0, &idx, &v, 1, sk::Exec{nullptr, &scratch}).status().code() ==
          absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("DgcSelect equals a naive transcription of the reference code", "[dgc]") {
  sk::Scratch scratch;
  const std::size_t n = GENERATE(1, 7, 2000, 10000, 100003, 1000000);
  const double ratio = GENERATE(0.01, 0.001);
  const int dist = GENERATE(0, 1, 2);
  const auto x = dist == 0 ? Gaussian(n, n + 1) : dist == 1 ? StudentT3(n, n + 2) : TiedGaussian(n, n + 3, 4.0f);
  sk::DgcSelectOptions o;
  o.compress_ratio = ratio;
  // Variants as a generator, not SECTIONs: ctest runs with --warn NoAssertions, and a SECTION whose
  // checks run after it closes counts as having none.
  const int variant = GENERATE(0, 1, 2, 3, 4);
  switch (variant) {
    case 1: o.strided_sample = false; break;    // uniform sampling
    case 2: o.resample = false; break;          // raise the threshold instead of resampling
    case 3: o.truncate_to_k = true; break;      // keep the first k, as the reference does
    case 4: o.max_adaptation_iters = 1; break;  // few adaptation steps
    default: break;                             // defaults
  }
  for (std::uint64_t seed : {1u, 2u, 3u}) CheckAgainstNaive(x, o, seed, scratch);
}

TEST_CASE("DgcSelect exercises every adaptation branch on small noisy samples", "[dgc]") {
  sk::Scratch scratch;
  sk::DgcSelectOptions o;  // n = 100003 at 0.001: τ is the 3rd largest of ~2000 samples, so it wanders
  const auto x = StudentT3(100003, 77);
  int adapted = 0, resampled = 0, untouched = 0;
  for (std::uint64_t seed = 0; seed < 120; ++seed) {
    Selected got;
    CheckAgainstNaive(x, o, seed, scratch, &got);
    if (got.info.resampled) {
      ++resampled;
    } else if (got.info.adaptation_iters > 0) {
      ++adapted;
    } else {
      ++untouched;
    }
  }
  INFO("adapted " << adapted << ", resampled " << resampled << ", untouched " << untouched);
  CHECK(adapted > 0);
  CHECK(resampled > 0);
  CHECK(untouched > 0);
}

TEST_CASE("DgcSelect count bounds on Gaussian and Student-t3 data", "[dgc]") {
  sk::Scratch scratch;
  const double ratio = GENERATE(0.01, 0.001);
  const bool heavy = GENERATE(false, true);
  const std::size_t n = 2000003;
  const auto x = heavy ? StudentT3(n, 5) : Gaussian(n, 6);
  sk::DgcSelectOptions o;
  o.compress_ratio = ratio;
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    const Selected got = RunDgc(x, o, seed, scratch);
    const double k = static_cast<double>(got.info.target);
    INFO("seed " << seed << ": count " << got.info.count << ", k " << k);
    if (got.info.resampled) {
      CHECK(got.info.count == got.info.target);
      CHECK(got.idx == [&] {
        auto top = sketchps::testing::NaiveTopKIndices(x, got.info.target);
        std::sort(top.begin(), top.end());
        return top;
      }());
    } else {
      CHECK(static_cast<double>(got.info.count) >= o.compress_lower_bound * k);
      CHECK(static_cast<double>(got.info.count) <= o.compress_upper_bound * k);
      CHECK(got.idx == AtLeast(x, got.info.threshold));  // exactly the entries at or above τ
    }
    for (std::size_t i = 0; i < got.idx.size(); ++i) REQUIRE(got.val[i] == x[got.idx[i]]);
  }
}

TEST_CASE("DgcSelect with sample_ratio = 1 uses the exact k-th largest magnitude", "[dgc]") {
  sk::Scratch scratch;
  const auto x = Gaussian(300007, 12);  // continuous: no ties
  sk::DgcSelectOptions o;
  o.sample_ratio = 1.0;
  o.compress_ratio = GENERATE(0.01, 0.001);
  const Selected got = RunDgc(x, o, 0, scratch);
  auto top = sketchps::testing::NaiveTopKIndices(x, got.info.target);
  CHECK(got.info.threshold == std::fabs(x[top.back()]));
  CHECK(got.info.count == got.info.target);
  std::sort(top.begin(), top.end());
  CHECK(got.idx == top);
}

TEST_CASE("DgcSelect handles ties, zeros, NaN and tiny inputs", "[dgc]") {
  sk::Scratch scratch;
  sk::DgcSelectOptions o;
  SECTION("all magnitudes equal: exact top-k, ties by index") {
    std::vector<float> x(50000, 1.0f);
    for (std::size_t i = 0; i < x.size(); i += 2) x[i] = -1.0f;
    const Selected got = RunDgc(x, o, 3, scratch);
    CHECK(got.info.resampled);
    CHECK(got.idx == std::vector<std::uint32_t>{0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                                                17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33,
                                                34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49});
  }
  SECTION("all zeros") {
    const Selected got = RunDgc(std::vector<float>(100000, 0.0f), o, 3, scratch);
    CHECK(got.info.count == 100);
  }
  SECTION("NaN entries are never selected") {
    auto x = Gaussian(100000, 4);
    for (std::size_t i = 0; i < x.size(); i += 10) x[i] = std::numeric_limits<float>::quiet_NaN();
    const Selected got = RunDgc(x, o, 3, scratch);
    for (auto i : got.idx) CHECK_FALSE(std::isnan(x[i]));
    CHECK(got.info.count > 0);
  }
  SECTION("n = 1 selects the entry") {
    const Selected got = RunDgc({-2.0f}, o, 3, scratch);
    CHECK(got.idx == std::vector<std::uint32_t>{0});
    CHECK(got.val == std::vector<float>{-2.0f});
  }
  SECTION("n = 0 selects nothing") {
    auto r = sk::DgcSelect(nullptr, 0, o, 3, nullptr, nullptr, 0, sk::Exec{nullptr, &scratch});
    REQUIRE(r.ok());
    CHECK(r->count == 0);
  }
}

TEST_CASE("DgcSelect is deterministic in the seed and checks its arguments", "[dgc]") {
  sk::Scratch scratch;
  const auto x = StudentT3(500000, 8);
  sk::DgcSelectOptions o;
  const Selected a = RunDgc(x, o, 42, scratch);
  const Selected b = RunDgc(x, o, 42, scratch);
  CHECK(a.idx == b.idx);
  CHECK(a.info.threshold == b.info.threshold);

  sk::DeviceArray<float> d_x(x);
  sk::DeviceArray<std::uint32_t> d_idx(1000);
  sk::DeviceArray<float> d_val(1000);
  const auto cap = *sk::DgcCapacity(x.size(), o);
  CHECK(cap == 650);  // k = 500, ⌊1.3·500⌋
  auto small =
      sk::DgcSelect(d_x.data(), x.size(), o, 1, d_idx.data(), d_val.data(), cap - 1, sk::Exec{nullptr, &scratch});
  REQUIRE(small.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(small.status().message().find("capacity") != std::string::npos);
  auto null_out = sk::DgcSelect(d_x.data(), x.size(), o, 1, nullptr, d_val.data(), cap, sk::Exec{nullptr, &scratch});
  CHECK(null_out.status().message().find("d_out_idx") != std::string::npos);
}

TEST_CASE("DGC selection time over SumAbs time at d = 25.6M", "[.bench]") {
  const std::size_t d = 25600000;
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  sk::DeviceArray<float> d_v(StudentT3(d, 1));
  sk::DgcSelectOptions o;  // δ = 0.001
  const auto cap = *sk::DgcCapacity(d, o);
  sk::DeviceArray<std::uint32_t> d_idx(cap);
  sk::DeviceArray<float> d_val(cap);
  auto median_ms = [](auto&& fn) {
    std::vector<double> ms;
    for (int rep = 0; rep < 9; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      fn(rep);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  std::size_t count = 0;
  const double sum_ms = median_ms([&](int) { REQUIRE(sk::SumAbs(d_v.data(), d, exec).ok()); });
  const double dgc_ms = median_ms([&](int rep) {
    auto r = sk::DgcSelect(d_v.data(), d, o, static_cast<std::uint64_t>(rep), d_idx.data(), d_val.data(), cap, exec);
    REQUIRE(r.ok());
    count = r->count;
  });
  std::cout << "d = " << d << ", threads = " << sk::BackendParallelism() << ": SumAbs " << sum_ms << " ms, DgcSelect "
            << dgc_ms << " ms, ratio " << dgc_ms / sum_ms << " (target <= 3), count " << count << "\n";
  CHECK(count > 0);
}
