// The benchmarks' yardstick (kernels/bandwidth.h) on inputs whose sum is known exactly: small
// integers, whose partial sums every backend holds without rounding, at lengths and offsets that
// exercise the vector body, the unaligned head and the tail. Its device time is checked against the
// host's wall time around it, which must contain it on either backend.
#include "kernels/bandwidth.h"

#include <chrono>
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

namespace sk = sketchps::kernels;

namespace {

// x_i in {-3, ..., 3}: every partial sum of up to 2^22 entries is an exact float.
std::vector<float> SmallIntegers(std::size_t n, std::uint32_t seed) {
  std::vector<float> x(n);
  std::uint32_t s = seed;
  for (auto& v : x) {
    s = s * 1664525u + 1013904223u;
    v = static_cast<float>(static_cast<int>((s >> 16) % 7) - 3);
  }
  return x;
}

double ExactSum(const std::vector<float>& x, std::size_t from, std::size_t n) {
  std::int64_t s = 0;
  for (std::size_t i = from; i < from + n; ++i) s += static_cast<std::int64_t>(x[i]);
  return static_cast<double>(s);
}

}  // namespace

TEST_CASE("BandwidthSum equals the exact sum at every length and offset", "[bandwidth]") {
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  const auto n = static_cast<std::size_t>(GENERATE(0, 1, 3, 5, 17, 1023, 1024, 1025, 65'537, 3'000'001));
  const auto offset = static_cast<std::size_t>(GENERATE(0, 1, 2, 3));
  const auto x = SmallIntegers(n + offset, 7 + static_cast<std::uint32_t>(n));
  sk::DeviceArray<float> d_x(x);
  const auto sum = sk::BandwidthSum(d_x.data() + offset, n, exec);
  REQUIRE(sum.ok());
  CHECK(*sum == ExactSum(x, offset, n));
}

TEST_CASE("The yardstick's device time lies within the host's wall time around it", "[bandwidth]") {
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  const auto n = static_cast<std::size_t>(GENERATE(1, 1'000'003));
  sk::DeviceArray<float> d_x(SmallIntegers(n, 3));
  for (int i = 0; i < 3; ++i) {
    const auto begin = std::chrono::steady_clock::now();
    const auto seconds = sk::BandwidthPassDeviceSeconds(d_x.data(), n, exec);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    REQUIRE(seconds.ok());
    CHECK(*seconds > 0.0);
    CHECK(*seconds <= wall);
  }
  const auto none = sk::BandwidthPassDeviceSeconds(d_x.data(), 0, exec);
  REQUIRE(none.ok());
  CHECK(*none == 0.0);
}

TEST_CASE("The yardstick names a missing scratch or vector", "[bandwidth]") {
  sk::Scratch scratch;
  sk::DeviceArray<float> d_x(std::vector<float>(8, 1.0f));
  const auto no_scratch = sk::BandwidthPassDeviceSeconds(d_x.data(), 8, sk::Exec{nullptr, nullptr});
  CHECK(no_scratch.status().message() == "BandwidthPassDeviceSeconds: exec.scratch is null");
  const auto no_vector = sk::BandwidthSum(nullptr, 8, sk::Exec{nullptr, &scratch});
  CHECK(no_vector.status().message() == "BandwidthSum: d_x is null");
}
