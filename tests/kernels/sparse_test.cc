#include "kernels/sparse.h"

#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "support/sparse_reference.h"

namespace sk = sketchps::kernels;
using sketchps::testing::Gaussian;
using sketchps::testing::HostSparse;
using sketchps::testing::NaiveKeepTopK;
using sketchps::testing::NaiveMerge;
using sketchps::testing::RandomSparse;

namespace {

std::vector<std::uint32_t> Bits(const std::vector<float>& v) {
  std::vector<std::uint32_t> bits(v.size());
  if (!v.empty()) std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
  return bits;
}

HostSparse RunMerge(const HostSparse& a, const HostSparse& b, sk::Scratch& scratch) {
  sk::DeviceArray<std::uint32_t> a_idx(a.idx), b_idx(b.idx);
  sk::DeviceArray<float> a_val(a.val), b_val(b.val);
  const std::size_t cap = std::max<std::size_t>(1, a.idx.size() + b.idx.size());
  sk::DeviceArray<std::uint32_t> out_idx(cap);
  sk::DeviceArray<float> out_val(cap);
  auto count = sk::MergeSparse(a_idx.data(), a_val.data(), a.idx.size(), b_idx.data(), b_val.data(), b.idx.size(),
                               out_idx.data(), out_val.data(), sk::Exec{nullptr, &scratch});
  REQUIRE(count.ok());
  return {out_idx.ToHost(*count), out_val.ToHost(*count)};
}

HostSparse RunKeepTopK(const HostSparse& s, std::size_t k, sk::Scratch& scratch) {
  sk::DeviceArray<std::uint32_t> idx(s.idx);
  sk::DeviceArray<float> val(s.val);
  const std::size_t cap = std::max<std::size_t>(1, std::min(k, s.idx.size()));
  sk::DeviceArray<std::uint32_t> out_idx(cap);
  sk::DeviceArray<float> out_val(cap);
  auto count = sk::KeepTopK(idx.data(), val.data(), s.idx.size(), k, out_idx.data(), out_val.data(),
                            sk::Exec{nullptr, &scratch});
  REQUIRE(count.ok());
  return {out_idx.ToHost(*count), out_val.ToHost(*count)};
}

}  // namespace

TEST_CASE("ScatterAdd equals a naive loop, payload by payload", "[sparse]") {
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  const std::uint32_t n = GENERATE(1u, 100u, 1000003u);
  const std::size_t count = GENERATE(0, 1, 50, 20000);
  auto dense = Gaussian(n, 1);
  sk::DeviceArray<float> d_dense(dense);
  for (std::uint64_t payload = 0; payload < 3; ++payload) {
    const HostSparse s = RandomSparse(n, count, 100 + payload);
    sk::DeviceArray<std::uint32_t> d_idx(s.idx);
    sk::DeviceArray<float> d_val(s.val);
    REQUIRE(sk::ScatterAdd(d_idx.data(), d_val.data(), s.idx.size(), d_dense.data(), n, exec).ok());
    for (std::size_t i = 0; i < s.idx.size(); ++i) dense[s.idx[i]] += s.val[i];
  }
  CHECK(Bits(d_dense.ToHost()) == Bits(dense));  // same order of adds: bitwise equal
}

TEST_CASE("ScatterAdd rejects an out-of-range index and writes nothing", "[sparse]") {
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  const std::vector<float> dense = Gaussian(1000, 2);
  sk::DeviceArray<float> d_dense(dense);
  const std::uint32_t bad = GENERATE(1000u, 1001u, 0xffffffffu);
  const std::size_t where = GENERATE(0, 5, 9);
  std::vector<std::uint32_t> idx{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  idx[where] = bad;
  sk::DeviceArray<std::uint32_t> d_idx(idx);
  sk::DeviceArray<float> d_val(std::vector<float>(idx.size(), 1.0f));
  const auto status = sk::ScatterAdd(d_idx.data(), d_val.data(), idx.size(), d_dense.data(), 1000, exec);
  REQUIRE(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message().find("d_idx") != std::string::npos);
  CHECK(Bits(d_dense.ToHost()) == Bits(dense));
}

TEST_CASE("ScatterAdd with duplicate indices still sums every entry", "[sparse]") {
  sk::Scratch scratch;
  sk::DeviceArray<float> d_dense(std::vector<float>(4, 0.0f));
  const std::vector<std::uint32_t> idx(100000, 2);  // precondition violated: no race, exact small-integer sum
  sk::DeviceArray<std::uint32_t> d_idx(idx);
  sk::DeviceArray<float> d_val(std::vector<float>(idx.size(), 1.0f));
  REQUIRE(sk::ScatterAdd(d_idx.data(), d_val.data(), idx.size(), d_dense.data(), 4, sk::Exec{nullptr, &scratch}).ok());
  CHECK(d_dense.ToHost() == std::vector<float>{0.0f, 0.0f, 100000.0f, 0.0f});
}

TEST_CASE("Gather equals a naive loop and checks its range", "[sparse]") {
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  const std::uint32_t n = GENERATE(1u, 1000u, 1000003u);
  const std::size_t count = GENERATE(0, 1, 777);
  const auto dense = Gaussian(n, 4);
  sk::DeviceArray<float> d_dense(dense);
  const HostSparse s = RandomSparse(n, count, 5);
  sk::DeviceArray<std::uint32_t> d_idx(s.idx);
  sk::DeviceArray<float> d_out(std::max<std::size_t>(1, s.idx.size()));
  REQUIRE(sk::Gather(d_dense.data(), n, d_idx.data(), s.idx.size(), d_out.data(), exec).ok());
  const auto got = d_out.ToHost(s.idx.size());
  for (std::size_t i = 0; i < s.idx.size(); ++i) CHECK(got[i] == dense[s.idx[i]]);

  sk::DeviceArray<std::uint32_t> d_bad(std::vector<std::uint32_t>{0, n});
  sk::DeviceArray<float> d_out2(std::vector<float>{-1.0f, -1.0f});
  CHECK(sk::Gather(d_dense.data(), n, d_bad.data(), 2, d_out2.data(), exec).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(d_out2.ToHost() == std::vector<float>{-1.0f, -1.0f});
}

TEST_CASE("SortByIndex sorts pairs like std::stable_sort", "[sparse]") {
  sk::Scratch scratch;
  const std::size_t count = GENERATE(0, 1, 2, 1000, 300001);
  std::mt19937_64 rng(count);
  std::vector<std::uint32_t> idx(count);
  std::vector<float> val(count);
  for (std::size_t i = 0; i < count; ++i) {
    idx[i] = static_cast<std::uint32_t>(rng() % (count + 1));  // duplicates included: order must be stable
    val[i] = static_cast<float>(i);
  }
  sk::DeviceArray<std::uint32_t> d_idx(idx);
  sk::DeviceArray<float> d_val(val);
  REQUIRE(sk::SortByIndex(d_idx.data(), d_val.data(), count, sk::Exec{nullptr, &scratch}).ok());
  std::vector<std::pair<std::uint32_t, float>> want;
  for (std::size_t i = 0; i < count; ++i) want.emplace_back(idx[i], val[i]);
  std::stable_sort(want.begin(), want.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const auto got_idx = d_idx.ToHost();
  const auto got_val = d_val.ToHost();
  for (std::size_t i = 0; i < count; ++i) {
    REQUIRE(got_idx[i] == want[i].first);
    REQUIRE(got_val[i] == want[i].second);
  }
}

TEST_CASE("MergeSparse equals a std::map union and is bitwise symmetric", "[sparse]") {
  sk::Scratch scratch;
  const std::uint32_t n = GENERATE(1u, 64u, 100000u);
  const std::size_t a_count = GENERATE(0, 1, 40, 5000);
  const std::size_t b_count = GENERATE(0, 1, 40, 5000);
  const HostSparse a = RandomSparse(n, a_count, 21);
  const HostSparse b = RandomSparse(n, b_count, 22);
  const HostSparse want = NaiveMerge(a, b);
  const HostSparse ab = RunMerge(a, b, scratch);
  const HostSparse ba = RunMerge(b, a, scratch);
  CHECK(ab.idx == want.idx);
  CHECK(Bits(ab.val) == Bits(want.val));
  CHECK(ba.idx == ab.idx);
  CHECK(Bits(ba.val) == Bits(ab.val));
}

TEST_CASE("MergeSparse of identical index sets sums the values", "[sparse]") {
  sk::Scratch scratch;
  const HostSparse a{{3, 7, 9}, {1.0f, -2.0f, 0.5f}};
  const HostSparse b{{3, 7, 9}, {0.25f, 2.0f, 0.5f}};
  const HostSparse got = RunMerge(a, b, scratch);
  CHECK(got.idx == std::vector<std::uint32_t>{3, 7, 9});
  CHECK(got.val == std::vector<float>{1.25f, 0.0f, 1.0f});
}

TEST_CASE("MergeSparse rejects unsorted or duplicated indices", "[sparse]") {
  sk::Scratch scratch;
  const auto bad = GENERATE(std::vector<std::uint32_t>{2, 1}, std::vector<std::uint32_t>{1, 1, 2});
  const bool bad_is_b = GENERATE(false, true);
  const std::vector<std::uint32_t> good{0, 5};
  sk::DeviceArray<std::uint32_t> d_bad(bad), d_good(good);
  sk::DeviceArray<float> d_val(std::vector<float>(3, 1.0f));
  sk::DeviceArray<std::uint32_t> out_idx(5);
  sk::DeviceArray<float> out_val(5);
  auto r = bad_is_b ? sk::MergeSparse(d_good.data(), d_val.data(), 2, d_bad.data(), d_val.data(), bad.size(),
                                      out_idx.data(), out_val.data(), sk::Exec{nullptr, &scratch})
                    : sk::MergeSparse(d_bad.data(), d_val.data(), bad.size(), d_good.data(), d_val.data(), 2,
                                      out_idx.data(), out_val.data(), sk::Exec{nullptr, &scratch});
  REQUIRE(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(r.status().message().find(bad_is_b ? "d_b_idx" : "d_a_idx") != std::string::npos);
}

TEST_CASE("KeepTopK equals the naive selection, ties broken by index", "[sparse]") {
  sk::Scratch scratch;
  const std::size_t count = GENERATE(0, 1, 2, 1000, 100000);
  const std::size_t k = GENERATE(0, 1, 10, 999, 5000, 200000);
  HostSparse s = RandomSparse(1u << 20, count, 31);
  for (auto& v : s.val) v = std::round(v * 4.0f) / 4.0f;  // many ties in |value|
  const HostSparse got = RunKeepTopK(s, k, scratch);
  const HostSparse want = NaiveKeepTopK(s, k);
  CHECK(got.idx == want.idx);
  CHECK(got.val == want.val);
}

TEST_CASE("KeepTopKMask marks exactly the entries KeepTopK keeps", "[sparse]") {
  sk::Scratch scratch;
  const std::size_t count = GENERATE(1, 1000, 100000);
  const std::size_t k = GENERATE(1, 100, 100000);
  HostSparse s = RandomSparse(1u << 20, count, 41);
  for (auto& v : s.val) v = std::round(v * 4.0f) / 4.0f;
  sk::DeviceArray<float> d_val(s.val);
  sk::DeviceArray<std::uint8_t> d_keep(std::vector<std::uint8_t>(count, 7));
  auto kept = sk::KeepTopKMask(d_val.data(), count, k, d_keep.data(), sk::Exec{nullptr, &scratch});
  REQUIRE(kept.ok());
  const HostSparse want = NaiveKeepTopK(s, k);
  REQUIRE(*kept == want.idx.size());
  const auto keep = d_keep.ToHost();
  std::vector<std::uint32_t> kept_idx;
  for (std::size_t i = 0; i < count; ++i) {
    REQUIRE(keep[i] <= 1);
    if (keep[i] == 1) kept_idx.push_back(s.idx[i]);
  }
  CHECK(kept_idx == want.idx);
}

TEST_CASE("gTop-k pairwise step: merge then keep-top-k picks the top of the union", "[sparse]") {
  sk::Scratch scratch;
  // Disjoint sets: the result is the top k of the union.
  const HostSparse a{{1, 4, 8}, {5.0f, -1.0f, 3.0f}};
  const HostSparse b{{2, 6, 9}, {-4.0f, 2.0f, 0.5f}};
  const HostSparse merged = RunMerge(a, b, scratch);
  const HostSparse top = RunKeepTopK(merged, 3, scratch);
  CHECK(top.idx == std::vector<std::uint32_t>{1, 2, 8});
  CHECK(top.val == std::vector<float>{5.0f, -4.0f, 3.0f});
}

TEST_CASE("Sparse kernels reject null pointers", "[sparse]") {
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  float dense = 0.0f;
  std::uint32_t idx = 0;
  const auto s = sk::ScatterAdd(nullptr, &dense, 1, &dense, 1, exec);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("d_idx") != std::string::npos);
  CHECK(sk::SortByIndex(&idx, nullptr, 1, exec).code() == absl::StatusCode::kInvalidArgument);
  CHECK(sk::KeepTopK(&idx, &dense, 1, 1, nullptr, &dense, exec).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(sk::ScatterAdd(&idx, &dense, 1, &dense, 1, sk::Exec{}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(dense == 0.0f);
}

TEST_CASE("FillAt sets exactly the indexed entries and checks the range", "[sparse]") {
  sketchps::kernels::Scratch scratch;
  sketchps::kernels::Exec exec{nullptr, &scratch};
  std::vector<float> x(100);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) + 0.5f;
  sketchps::kernels::DeviceArray<float> d_x(x);
  const std::vector<std::uint32_t> idx = {0, 7, 42, 99};
  sketchps::kernels::DeviceArray<std::uint32_t> d_idx(idx);
  REQUIRE(sketchps::kernels::FillAt(d_x.data(), x.size(), d_idx.data(), idx.size(), 0.0f, exec).ok());
  for (auto i : idx) x[i] = 0.0f;
  CHECK(d_x.ToHost() == x);
  sketchps::kernels::DeviceArray<std::uint32_t> bad(std::vector<std::uint32_t>{3, 100});
  CHECK(sketchps::kernels::FillAt(d_x.data(), x.size(), bad.data(), 2, 9.0f, exec).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(d_x.ToHost() == x);  // nothing written on error
}
