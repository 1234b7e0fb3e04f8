#include "common/fp16.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "support/codec_reference.h"

using sketchps::FloatToHalfBits;
using sketchps::HalfBitsToFloat;
using sketchps::testing::BitsFloat;
using sketchps::testing::FloatBits;
using sketchps::testing::HalfClosedForm;
using sketchps::testing::NearestHalf;

namespace {

bool IsHalfNaN(std::uint16_t h) { return (h & 0x7FFF) > 0x7C00; }

// Compares FloatToHalfBits(f) with the nearest-value search; returns false (after reporting) on a
// mismatch so that a broken conversion does not flood the log.
bool MatchesNearest(float f, const NearestHalf& nearest) {
  const std::uint16_t got = FloatToHalfBits(f);
  if (std::isnan(f)) {
    if (IsHalfNaN(got) && (got >> 15) == (FloatBits(f) >> 31)) return true;
    FAIL_CHECK("NaN float bits " << FloatBits(f) << " -> half " << got);
    return false;
  }
  const std::uint16_t want = nearest(f);
  if (got == want) return true;
  FAIL_CHECK("float " << f << " (bits " << FloatBits(f) << ") -> half " << got << ", nearest is " << want);
  return false;
}

}  // namespace

TEST_CASE("HalfBitsToFloat equals the IEEE closed form for all 65536 patterns", "[fp16]") {
  int mismatches = 0;
  for (std::uint32_t h = 0; h < 65536 && mismatches < 10; ++h) {
    const auto h16 = static_cast<std::uint16_t>(h);
    const float got = HalfBitsToFloat(h16);
    const double want = HalfClosedForm(h16);
    bool ok = false;
    if (IsHalfNaN(h16)) {  // NaN: sign and payload preserved in the top mantissa bits
      ok = std::isnan(got) && FloatBits(got) == (((h & 0x8000u) << 16) | 0x7F800000u | ((h & 0x3FFu) << 13));
    } else {
      ok = static_cast<double>(got) == want && std::signbit(got) == ((h >> 15) != 0);
    }
    if (!ok) {
      ++mismatches;
      FAIL_CHECK("half " << h << " -> " << got << ", expected " << want);
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("half -> float -> half reproduces every half pattern", "[fp16]") {
  int mismatches = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto h16 = static_cast<std::uint16_t>(h);
    const std::uint16_t back = FloatToHalfBits(HalfBitsToFloat(h16));
    // NaN payloads are not kept (fp16.h): a NaN comes back as the canonical quiet NaN, same sign.
    const std::uint16_t want = IsHalfNaN(h16) ? static_cast<std::uint16_t>((h & 0x8000u) | 0x7E00u) : h16;
    if (back != want && ++mismatches <= 10) FAIL_CHECK("half " << h << " -> " << back);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("FloatToHalfBits rounds to the nearest half, ties to even", "[fp16]") {
  const NearestHalf nearest;
  const std::vector<double>& v = nearest.values();
  int failures = 0;
  auto check = [&](float f) {
    if (failures < 10 && !MatchesNearest(f, nearest)) ++failures;
    if (failures < 10 && !MatchesNearest(-f, nearest)) ++failures;
  };

  SECTION("every tie between adjacent halves, and the floats just around it") {
    for (std::size_t i = 0; i + 1 < v.size(); ++i) {  // the last tie, 65520, is the overflow boundary
      const auto mid = static_cast<float>((v[i] + v[i + 1]) / 2);
      REQUIRE(static_cast<double>(mid) == (v[i] + v[i + 1]) / 2);  // ties are exact floats
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
  SECTION("log-uniform random floats across the half range and beyond") {
    std::mt19937_64 rng(20240611);
    std::uniform_real_distribution<double> exponent(-30.0, 18.0);
    for (int i = 0; i < 200000; ++i) check(static_cast<float>(std::exp2(exponent(rng))));
    CHECK(failures == 0);
  }
  SECTION("named boundaries") {
    for (const float f : {0.0f, 65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e10f, FLT_MAX, INFINITY,
                          std::numeric_limits<float>::denorm_min(), FLT_MIN, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1.8p-24f,
                          0x1p-14f, 0x1.ffcp-15f, 0x1.ffep-15f}) {
      check(f);
    }
    CHECK(failures == 0);
  }
}

TEST_CASE("FloatToHalfBits special cases by value", "[fp16]") {
  CHECK(FloatToHalfBits(1.0f) == 0x3C00);
  CHECK(FloatToHalfBits(-2.0f) == 0xC000);
  CHECK(FloatToHalfBits(65504.0f) == 0x7BFF);
  CHECK(FloatToHalfBits(65519.0f) == 0x7BFF);
  CHECK(FloatToHalfBits(65520.0f) == 0x7C00);  // tie with the (even) overflow value -> infinity
  CHECK(FloatToHalfBits(-1e6f) == 0xFC00);
  CHECK(FloatToHalfBits(0x1p-24f) == 0x0001);    // smallest subnormal
  CHECK(FloatToHalfBits(0x1p-25f) == 0x0000);    // tie -> even (zero)
  CHECK(FloatToHalfBits(0x1.8p-24f) == 0x0002);  // 1.5 ulp tie -> even (2 ulp)
  CHECK(FloatToHalfBits(-0.0f) == 0x8000);
  CHECK(FloatToHalfBits(1.0f + 0x1p-11f) == 0x3C00);  // tie -> even
  CHECK(FloatToHalfBits(1.0f + 0x1.8p-10f) == 0x3C02);
  CHECK(FloatToHalfBits(-std::numeric_limits<float>::quiet_NaN()) == 0xFE00);
  CHECK(FloatToHalfBits(std::numeric_limits<float>::signaling_NaN()) == 0x7E00);
}
