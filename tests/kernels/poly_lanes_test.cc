// The CPU backend's interleaved kPolynomial61 walks (kernels/internal/poly_lanes.h) against the
// naive 128-bit `%` evaluation of tests/support/sketch_reference.h.
#include "kernels/internal/poly_lanes.h"

#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "support/sketch_reference.h"

namespace internal = sketchps::kernels::internal;
using sketchps::CountSketchHash;

TEST_CASE("Interleaved polynomial walks equal the naive hash", "[count_sketch]") {
  // cols: one bucket, a small odd count, the bench's 10k, a power of two, the largest table width.
  const std::uint32_t cols = GENERATE(1u, 3u, 997u, 256000u, 1u << 20, 1u << 28);
  const std::uint64_t seed = GENERATE(1u, 99u);
  // Starts at 0, an odd position, and close to the end of the uint32 range.
  const std::uint32_t first = GENERATE(0u, 12345u, 0xffffffffu - 8u * 700u);
  auto hash = CountSketchHash::Create({1, cols, seed, 1ull << 32 >> 1});
  REQUIRE(hash.ok());
  const auto naive = sketchps::testing::NaivePolyRows(seed, 1)[0];
  internal::PolyLanes lanes = internal::StartPolyLanes(hash->PolyRow(0), first);
  constexpr std::size_t kSteps = 300;  // walked as 300 + 399 steps: the state carries across calls
  std::vector<std::uint32_t> bucket(699 * internal::kPolyLanes), sign(699 * internal::kPolyLanes);
  internal::WalkPolyLanes(lanes, kSteps, bucket.data(), sign.data());
  internal::WalkPolyLanes(lanes, 399, bucket.data() + kSteps * internal::kPolyLanes,
                          sign.data() + kSteps * internal::kPolyLanes);
  for (std::size_t t = 0; t < bucket.size(); ++t) {
    const std::uint64_t i = first + t;
    INFO("cols " << cols << " seed " << seed << " coordinate " << i);
    REQUIRE(bucket[t] == sketchps::testing::NaivePolyBucket(naive, cols, i));
    REQUIRE(sign[t] == (sketchps::testing::NaivePolySign(naive, i) > 0 ? 0u : 0x80000000u));
  }
  CHECK(internal::FlipSign(2.5f, 0x80000000u) == -2.5f);
  CHECK(internal::FlipSign(-2.5f, 0u) == -2.5f);
}
