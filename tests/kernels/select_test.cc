#include "kernels/select.h"

#include <catch2/catch.hpp>

#include "support/reference.h"

namespace sk = sketchps::kernels;
using sketchps::testing::NaiveTopKIndices;
using sketchps::testing::TiedGaussian;

namespace {

struct TopKResult {
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
};

TopKResult RunTopK(const std::vector<float>& x, std::size_t k, sk::Scratch& scratch) {
  sk::DeviceArray<float> d_x(x);
  const std::size_t cap = std::max<std::size_t>(1, std::min(k, x.size()));
  sk::DeviceArray<std::uint32_t> d_idx(cap);
  sk::DeviceArray<float> d_val(cap);
  auto count = sk::TopK(d_x.data(), x.size(), k, d_idx.data(), d_val.data(), sk::Exec{nullptr, &scratch});
  REQUIRE(count.ok());
  return {d_idx.ToHost(*count), d_val.ToHost(*count)};
}

}  // namespace

TEST_CASE("TopK equals the naive sort, ties broken by index", "[select]") {
  sk::Scratch scratch;
  const auto n = GENERATE(1, 7, 1000, 100000, 300001);
  const auto k_frac = GENERATE(0.0001, 0.001, 0.01, 0.3, 1.0);
  const auto seed = GENERATE(1u, 2u);
  const auto x = TiedGaussian(n, seed);
  const auto k = std::max<std::size_t>(1, static_cast<std::size_t>(k_frac * n));
  const auto got = RunTopK(x, k, scratch);
  const auto want = NaiveTopKIndices(x, k);
  REQUIRE(got.idx == want);
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(got.val[i] == x[want[i]]);
}

TEST_CASE("TopK handles k = 0, k > n and sparse inputs", "[select]") {
  sk::Scratch scratch;
  SECTION("k = 0 selects nothing") { CHECK(RunTopK({1.0f, 2.0f}, 0, scratch).idx.empty()); }
  SECTION("k > n selects everything in rank order") {
    CHECK(RunTopK({1.0f, -3.0f, 2.0f}, 10, scratch).idx == std::vector<std::uint32_t>{1, 2, 0});
  }
  SECTION("fewer nonzeros than k: zeros follow by index") {
    std::vector<float> x(50000, 0.0f);
    x[40000] = -1.0f;
    x[7] = 0.5f;
    CHECK(RunTopK(x, 4, scratch).idx == std::vector<std::uint32_t>{40000, 7, 0, 1});
  }
  SECTION("mostly zeros with enough nonzeros") {
    std::vector<float> x(200000, 0.0f);
    for (std::size_t i = 0; i < 300; ++i) x[i * 613] = static_cast<float>(i % 17) + 1.0f;
    CHECK(RunTopK(x, 100, scratch).idx == NaiveTopKIndices(x, 100));
  }
}

TEST_CASE("TopK does not allocate once the scratch is warm", "[select]") {
  sk::Scratch scratch;
  const auto x = TiedGaussian(200000, 9);
  RunTopK(x, 200, scratch);
  const auto allocations = scratch.SystemAllocations();
  RunTopK(x, 200, scratch);
  CHECK(scratch.SystemAllocations() == allocations);
}

TEST_CASE("TopK rejects a null input", "[select]") {
  sk::Scratch scratch;
  std::uint32_t idx = 0;
  float val = 0;
  auto r = sk::TopK(nullptr, 10, 1, &idx, &val, sk::Exec{nullptr, &scratch});
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("ThresholdSelect equals a naive filter and respects capacity", "[select]") {
  sk::Scratch scratch;
  sk::Exec exec{nullptr, &scratch};
  const auto x = TiedGaussian(100000, 3);
  const float tau = GENERATE(0.0f, 1.0f, 2.5f, 10.0f);
  std::vector<std::uint32_t> want_idx;
  for (std::uint32_t i = 0; i < x.size(); ++i)
    if (std::fabs(x[i]) > tau) want_idx.push_back(i);
  sk::DeviceArray<float> d_x(x);
  sk::DeviceArray<std::uint32_t> d_idx(x.size());
  sk::DeviceArray<float> d_val(x.size());
  auto count = sk::CountAbove(d_x.data(), x.size(), tau, exec);
  REQUIRE(count.ok());
  CHECK(*count == want_idx.size());
  auto selected = sk::ThresholdSelect(d_x.data(), x.size(), tau, x.size(), d_idx.data(), d_val.data(), exec);
  REQUIRE(selected.ok());
  REQUIRE(d_idx.ToHost(*selected) == want_idx);
  const auto vals = d_val.ToHost(*selected);
  for (std::size_t i = 0; i < want_idx.size(); ++i) CHECK(vals[i] == x[want_idx[i]]);
  if (!want_idx.empty()) {
    auto too_small =
        sk::ThresholdSelect(d_x.data(), x.size(), tau, want_idx.size() - 1, d_idx.data(), d_val.data(), exec);
    CHECK(too_small.status().code() == absl::StatusCode::kResourceExhausted);
  }
}

TEST_CASE("SampledMagnitudeQuantile over the full input is an exact order statistic", "[select]") {
  sk::Scratch scratch;
  const auto x = TiedGaussian(5000, 4);
  sk::DeviceArray<float> d_x(x);
  auto q = sk::SampledMagnitudeQuantile(d_x.data(), x.size(), 0.01, 0, 1, sk::Exec{nullptr, &scratch});
  REQUIRE(q.ok());
  const auto order = NaiveTopKIndices(x, x.size());
  CHECK(*q == std::fabs(x[order[50]]));
  auto bad = sk::SampledMagnitudeQuantile(d_x.data(), x.size(), 1.5, 0, 1, sk::Exec{nullptr, &scratch});
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
}
