// Naive, independent references for the payload codec tests: byte-by-byte little-endian and varint
// writers (no protobuf), binary16 and bfloat16 values from their closed forms and nearest-value
// searches, and
// validity predicates for decoded payloads. Deliberately simple: the codecs are checked against them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/payload.h"

namespace sketchps::testing {

// 32-bit words as little-endian bytes.
inline std::string RefLE32(const std::vector<std::uint32_t>& words) {
  std::string out;
  for (const std::uint32_t w : words) {
    for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>((w >> (8 * b)) & 0xFF));
  }
  return out;
}

inline std::uint32_t FloatBits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float BitsFloat(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline std::string RefF32(const std::vector<float>& values) {
  std::vector<std::uint32_t> words;
  for (const float v : values) words.push_back(FloatBits(v));
  return RefLE32(words);
}

// Canonical base-128 varint: 7 bits per byte, low group first, high bit = "more follows".
inline std::string RefVarint(std::uint64_t v) {
  std::string out;
  do {
    const auto low = static_cast<unsigned char>(v & 0x7F);
    v >>= 7;
    out.push_back(static_cast<char>(v != 0 ? (low | 0x80) : low));
  } while (v != 0);
  return out;
}

// First index, then gaps, each a varint. idx must be strictly increasing.
inline std::string RefDeltaVarint(const std::vector<std::uint32_t>& idx) {
  std::string out;
  std::uint32_t prev = 0;
  for (const std::uint32_t i : idx) {
    out += RefVarint(i - prev);
    prev = i;
  }
  return out;
}

// The value of half bit pattern h from the IEEE 754 definition (NaN for NaN patterns).
inline double HalfClosedForm(std::uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int e = (h >> 10) & 0x1F;
  const int m = h & 0x3FF;
  if (e == 31) return m == 0 ? sign * INFINITY : NAN;
  if (e == 0) return sign * std::ldexp(static_cast<double>(m), -24);
  return sign * std::ldexp(static_cast<double>(1024 + m), e - 25);
}

// Nearest binary16 pattern to a non-NaN f: ties to the even pattern, and 2^16 (pattern 0x7C00)
// stands in for infinity as the next value after 65504, so IEEE overflow falls out of the search.
class NearestHalf {
 public:
  NearestHalf() {
    for (std::uint32_t h = 0; h < 0x7C00; ++h) values_.push_back(HalfClosedForm(static_cast<std::uint16_t>(h)));
    values_.push_back(65536.0);  // index 0x7C00: +infinity
  }

  std::uint16_t operator()(float f) const {
    const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    const double a = std::fabs(static_cast<double>(f));
    if (a >= values_.back()) return sign | 0x7C00;
    const auto hi = static_cast<std::size_t>(std::lower_bound(values_.begin(), values_.end(), a) - values_.begin());
    if (values_[hi] == a) return sign | static_cast<std::uint16_t>(hi);
    const std::size_t lo = hi - 1;                       // values_[0] == 0 <= a, so hi >= 1 here
    const double mid = (values_[lo] + values_[hi]) / 2;  // exact: adjacent halves differ in 11 bits
    std::size_t pick = a < mid ? lo : hi;
    if (a == mid) pick = (lo % 2 == 0) ? lo : hi;
    return sign | static_cast<std::uint16_t>(pick);
  }

  // Non-negative finite half values in increasing order, followed by 2^16.
  const std::vector<double>& values() const { return values_; }

 private:
  std::vector<double> values_;
};

// The value of bfloat16 bit pattern b from its definition (sign, 8-bit exponent with bias 127,
// 7-bit fraction; NaN for NaN patterns), computed in long double without looking at float bits.
inline long double BFloat16ClosedForm(std::uint16_t b) {
  const int sign = (b >> 15) ? -1 : 1;
  const int e = (b >> 7) & 0xFF;
  const int m = b & 0x7F;
  if (e == 255) return m == 0 ? sign * static_cast<long double>(INFINITY) : static_cast<long double>(NAN);
  if (e == 0) return sign * std::ldexp(static_cast<long double>(m), -133);
  return sign * std::ldexp(static_cast<long double>(128 + m), e - 134);
}

// Nearest bfloat16 pattern to a non-NaN f: ties to the even pattern, and 2^128 (pattern 0x7F80)
// stands in for infinity as the next value after the largest finite one, so overflow falls out of
// the search. Works in long double (every midpoint of adjacent bfloat16 values is exact there).
class NearestBFloat16 {
 public:
  NearestBFloat16() {
    for (std::uint32_t b = 0; b < 0x7F80; ++b) values_.push_back(BFloat16ClosedForm(static_cast<std::uint16_t>(b)));
    values_.push_back(std::ldexp(1.0L, 128));  // index 0x7F80: +infinity
  }

  std::uint16_t operator()(float f) const {
    const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    const long double a = std::fabs(static_cast<long double>(f));
    if (a >= values_.back()) return sign | 0x7F80;
    const auto hi = static_cast<std::size_t>(std::lower_bound(values_.begin(), values_.end(), a) - values_.begin());
    if (values_[hi] == a) return sign | static_cast<std::uint16_t>(hi);
    const std::size_t lo = hi - 1;
    const long double mid = (values_[lo] + values_[hi]) / 2;
    std::size_t pick = a < mid ? lo : hi;
    if (a == mid) pick = (lo % 2 == 0) ? lo : hi;
    return sign | static_cast<std::uint16_t>(pick);
  }

  // Non-negative finite bfloat16 values in increasing order, followed by 2^128.
  const std::vector<long double>& values() const { return values_; }

 private:
  std::vector<long double> values_;
};

inline bool AllFinite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

inline bool IncreasingBelow(const std::vector<std::uint32_t>& idx, std::uint64_t dim) {
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] >= dim || (i > 0 && idx[i] <= idx[i - 1])) return false;
  }
  return true;
}

}  // namespace sketchps::testing
