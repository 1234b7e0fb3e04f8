// Naive host references and data generators shared by the test suites. Deliberately simple:
// they are what the kernels are checked against.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

namespace sketchps::testing {

// Indices of x sorted by (|x| descending, index ascending), truncated to k.
inline std::vector<std::uint32_t> NaiveTopKIndices(const std::vector<float>& x, std::size_t k) {
  std::vector<std::uint32_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return std::fabs(x[a]) > std::fabs(x[b]); });
  idx.resize(std::min(k, idx.size()));
  return idx;
}

// Gaussian values rounded to `levels` per unit, so that magnitudes tie often.
inline std::vector<float> TiedGaussian(std::size_t n, std::uint64_t seed, float levels = 8.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = std::round(normal(rng) * levels) / levels;
  return x;
}

// Student-t with 3 degrees of freedom: the heavy-tailed shape of real gradients.
inline std::vector<float> StudentT3(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::student_t_distribution<float> t(3.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = t(rng) * scale;
  return x;
}

}  // namespace sketchps::testing
