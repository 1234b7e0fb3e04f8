#include "common/bf16.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "support/codec_reference.h"

using sketchps::BFloat16BitsToFloat;
using sketchps::FloatToBFloat16Bits;
using sketchps::kBFloat16Max;
using sketchps::RoundToBFloat16;
using sketchps::testing::BFloat16ClosedForm;
using sketchps::testing::BitsFloat;
using sketchps::testing::FloatBits;
using sketchps::testing::NearestBFloat16;

namespace {

bool IsBFloat16NaN(std::uint16_t b) { return (b & 0x7FFF) > 0x7F80; }

// Compares FloatToBFloat16Bits(f) with the nearest-value search; false (after reporting) on a
// mismatch so that a broken conversion does not flood the log.
bool MatchesNearest(float f, const NearestBFloat16& nearest) {
  const std::uint16_t got = FloatToBFloat16Bits(f);
  if (std::isnan(f)) {
    if (got == (((FloatBits(f) >> 16) & 0x8000u) | 0x7FC0u)) return true;
    FAIL_CHECK("NaN float bits " << FloatBits(f) << " -> bfloat16 " << got);
    return false;
  }
  const std::uint16_t want = nearest(f);
  if (got == want) return true;
  FAIL_CHECK("float " << f << " (bits " << FloatBits(f) << ") -> bfloat16 " << got << ", nearest is " << want);
  return false;
}

}  // namespace

TEST_CASE("BFloat16BitsToFloat equals the closed form for all 65536 patterns", "[bf16]") {
  int mismatches = 0;
  for (std::uint32_t b = 0; b < 65536 && mismatches < 10; ++b) {
    const auto b16 = static_cast<std::uint16_t>(b);
    const float got = BFloat16BitsToFloat(b16);
    bool ok = false;
    if (IsBFloat16NaN(b16)) {  // NaN: sign and payload preserved (the float's top 16 bits)
      ok = std::isnan(got) && FloatBits(got) == (b << 16);
    } else {
      ok = static_cast<long double>(got) == BFloat16ClosedForm(b16) && std::signbit(got) == ((b >> 15) != 0);
    }
    if (!ok) {
      ++mismatches;
      FAIL_CHECK("bfloat16 " << b << " -> " << got << ", expected " << static_cast<double>(BFloat16ClosedForm(b16)));
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("bfloat16 -> float -> bfloat16 reproduces every pattern", "[bf16]") {
  int mismatches = 0;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto b16 = static_cast<std::uint16_t>(b);
    const std::uint16_t back = FloatToBFloat16Bits(BFloat16BitsToFloat(b16));
    // NaN payloads are not kept (bf16.h): a NaN comes back as the quiet NaN 0x7FC0, same sign.
    const std::uint16_t want = IsBFloat16NaN(b16) ? static_cast<std::uint16_t>((b & 0x8000u) | 0x7FC0u) : b16;
    if (back != want && ++mismatches <= 10) FAIL_CHECK("bfloat16 " << b << " -> " << back);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("FloatToBFloat16Bits rounds to the nearest bfloat16, ties to even", "[bf16]") {
  const NearestBFloat16 nearest;
  const std::vector<long double>& v = nearest.values();
  int failures = 0;
  auto check = [&](float f) {
    if (failures < 10 && !MatchesNearest(f, nearest)) ++failures;
    if (failures < 10 && !MatchesNearest(-f, nearest)) ++failures;
  };

  SECTION("every tie between adjacent bfloat16 values, and the floats just around it") {
    for (std::size_t i = 0; i + 1 < v.size(); ++i) {  // the last tie is the overflow boundary
      const long double mid_exact = (v[i] + v[i + 1]) / 2;
      const auto mid = static_cast<float>(mid_exact);
      REQUIRE(static_cast<long double>(mid) == mid_exact);  // ties are exact floats
      check(mid);
      check(std::nextafter(mid, 0.0f));
      check(std::nextafter(mid, INFINITY));
      check(static_cast<float>(v[i]));
    }
    CHECK(failures == 0);
  }
  SECTION("a stride through all 2^32 float bit patterns (NaNs, subnormals, huge values)") {
    for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += 1021) check(BitsFloat(static_cast<std::uint32_t>(u)));
    CHECK(failures == 0);
  }
  SECTION("random float bit patterns") {
    std::mt19937 rng(20261127);
    for (int i = 0; i < 1000000; ++i) check(BitsFloat(static_cast<std::uint32_t>(rng())));
    CHECK(failures == 0);
  }
  SECTION("every float with a 16-bit low half of 0x7FFF, 0x8000 or 0x8001 (below, at, above a tie)") {
    for (std::uint32_t hi = 0; hi < 0x8000; ++hi) {
      for (const std::uint32_t lo : {0x7FFFu, 0x8000u, 0x8001u}) check(BitsFloat((hi << 16) | lo));
    }
    CHECK(failures == 0);
  }
  SECTION("named boundaries") {
    for (const float f : {0.0f, kBFloat16Max, std::nextafter(kBFloat16Max, INFINITY), 0x1.ffp127f, 0x1.fep127f, FLT_MAX,
                          INFINITY, std::numeric_limits<float>::denorm_min(), FLT_MIN, 0x1p-133f, 0x1p-134f,
                          0x1.8p-133f, 0x1.fcp-127f, 0x1.fep-127f, 1.0f, 1.0f + 0x1p-8f, 1.0f + 0x1.8p-7f}) {
      check(f);
    }
    CHECK(failures == 0);
  }
}

TEST_CASE("FloatToBFloat16Bits special cases by value", "[bf16]") {
  CHECK(FloatToBFloat16Bits(1.0f) == 0x3F80);
  CHECK(FloatToBFloat16Bits(-2.0f) == 0xC000);
  CHECK(FloatToBFloat16Bits(kBFloat16Max) == 0x7F7F);
  CHECK(BFloat16BitsToFloat(0x7F7F) == kBFloat16Max);
  CHECK(FloatToBFloat16Bits(std::nextafter(0x1.ffp127f, 0.0f)) == 0x7F7F);  // just below the overflow tie
  CHECK(FloatToBFloat16Bits(0x1.ffp127f) == 0x7F80);  // the tie with the (even) overflow value -> infinity
  CHECK(FloatToBFloat16Bits(FLT_MAX) == 0x7F80);      // finite float, infinite bfloat16
  CHECK(FloatToBFloat16Bits(-INFINITY) == 0xFF80);
  CHECK(FloatToBFloat16Bits(0x1p-133f) == 0x0001);    // smallest subnormal
  CHECK(FloatToBFloat16Bits(0x1p-134f) == 0x0000);    // tie -> even (zero)
  CHECK(FloatToBFloat16Bits(0x1.8p-133f) == 0x0002);  // 1.5 ulp tie -> even (2 ulp)
  CHECK(FloatToBFloat16Bits(-0.0f) == 0x8000);
  CHECK(FloatToBFloat16Bits(1.0f + 0x1p-8f) == 0x3F80);    // tie -> even
  CHECK(FloatToBFloat16Bits(1.0f + 0x1.8p-7f) == 0x3F82);  // tie -> even (up)
  CHECK(FloatToBFloat16Bits(-std::numeric_limits<float>::quiet_NaN()) == 0xFFC0);
  CHECK(FloatToBFloat16Bits(std::numeric_limits<float>::signaling_NaN()) == 0x7FC0);
  CHECK(RoundToBFloat16(1.0f + 0x1p-7f) == 1.0f + 0x1p-7f);
  CHECK(RoundToBFloat16(3.14159265f) == 3.140625f);
}
