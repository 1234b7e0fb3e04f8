// Naive host references and generators for Count Sketch tests. Deliberately simple: plain loops,
// std::sort medians, and an independent evaluation of the kPolynomial61 family with 128-bit `%`.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/count_sketch_hash.h"
#include "common/splitmix.h"

namespace sketchps::testing {

__extension__ typedef unsigned __int128 U128;  // GCC/Clang extension, quiet under -Wpedantic

// table (rows x cols, row-major) = S(x) by the definition: T[j][h_j(i)] += s_j(i)·x_i.
inline std::vector<float> NaiveSketch(const std::vector<float>& x, const CountSketchHash& hash) {
  std::vector<float> table(hash.cells(), 0.0f);
  for (std::uint32_t j = 0; j < hash.rows(); ++j) {
    for (std::uint32_t i = 0; i < x.size(); ++i) {
      table[std::size_t{j} * hash.cols() + hash.Bucket(j, i)] += static_cast<float>(hash.Sign(j, i)) * x[i];
    }
  }
  return table;
}

// Lower median over rows of s_j(i)·T[j][h_j(i)].
inline float NaiveEstimate(const std::vector<float>& table, const CountSketchHash& hash, std::uint32_t i) {
  std::vector<float> v(hash.rows());
  for (std::uint32_t j = 0; j < hash.rows(); ++j) {
    v[j] = static_cast<float>(hash.Sign(j, i)) * table[std::size_t{j} * hash.cols() + hash.Bucket(j, i)];
  }
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

// sqrt(lower median over rows of the row's sum of squares), summed in double in column order.
inline double NaiveL2Estimate(const std::vector<float>& table, std::uint32_t rows, std::uint32_t cols) {
  std::vector<double> sums(rows, 0.0);
  for (std::uint32_t j = 0; j < rows; ++j) {
    for (std::uint32_t c = 0; c < cols; ++c) {
      const double v = table[std::size_t{j} * cols + c];
      sums[j] += v * v;
    }
  }
  std::sort(sums.begin(), sums.end());
  return std::sqrt(sums[(rows - 1) / 2]);
}

// kPolynomial61 evaluated independently of count_sketch_hash.h's arithmetic: coefficients drawn as
// documented (top 61 bits of each splitmix64 draw, rejecting p), then 128-bit `%`.
struct NaivePolyRow {
  U128 a, b, q1, q2, q3, q4;
};

inline std::vector<NaivePolyRow> NaivePolyRows(std::uint64_t seed, std::uint32_t rows) {
  const U128 p = (std::uint64_t{1} << 61) - 1;
  std::vector<NaivePolyRow> out;
  for (std::uint32_t j = 0; j < rows; ++j) {
    SplitMix64Rng rng(SplitMix64(seed ^ SplitMix64(j)));
    std::array<U128, 6> c{};
    for (auto& v : c) {
      do v = rng.Next() >> 3;
      while (v == p);
    }
    out.push_back({c[0], c[1], c[2], c[3], c[4], c[5]});
  }
  return out;
}

inline std::uint32_t NaivePolyBucket(const NaivePolyRow& r, std::uint32_t cols, std::uint64_t i) {
  const U128 p = (std::uint64_t{1} << 61) - 1;
  return static_cast<std::uint32_t>(((r.a * i + r.b) % p) % cols);
}

inline int NaivePolySign(const NaivePolyRow& r, std::uint64_t i) {
  const U128 p = (std::uint64_t{1} << 61) - 1;
  U128 y = r.q1;
  y = (y * i + r.q2) % p;
  y = (y * i + r.q3) % p;
  y = (y * i + r.q4) % p;
  return (y % 2 == 1) ? 1 : -1;
}

// N(0,1) noise of length d with `count` distinct spikes of magnitude in [lo, hi) and random sign.
// `blocky` replaces the noise by runs of +1 / −1 of length 1000 (a structured input).
struct Planted {
  std::vector<float> x;
  std::vector<std::uint32_t> spikes;
};

inline Planted PlantSpikes(std::size_t d, std::size_t count, float lo, float hi, std::uint64_t seed,
                           bool blocky = false) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Planted out;
  out.x.resize(d);
  for (std::size_t i = 0; i < d; ++i) out.x[i] = blocky ? ((i / 1000) % 2 ? 1.0f : -1.0f) : normal(rng);
  std::uniform_int_distribution<std::uint32_t> pick(0, static_cast<std::uint32_t>(d - 1));
  std::uniform_real_distribution<float> magnitude(lo, hi);
  std::vector<char> used(d, 0);
  while (out.spikes.size() < count) {
    const std::uint32_t i = pick(rng);
    if (used[i]) continue;
    used[i] = 1;
    out.spikes.push_back(i);
    out.x[i] = (rng() & 1 ? 1.0f : -1.0f) * magnitude(rng);
  }
  return out;
}

}  // namespace sketchps::testing
