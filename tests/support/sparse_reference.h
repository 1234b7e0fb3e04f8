// Naive host references and generators for the sparse-vector and DGC kernel tests. Deliberately
// simple (std::map, std::sort, plain loops): they are what the kernels are checked against.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

namespace sketchps::testing {

// A host sparse vector: parallel index / value arrays.
struct HostSparse {
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
};

// `count` distinct indices in [0, n), strictly increasing, with Gaussian values.
inline HostSparse RandomSparse(std::uint32_t n, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint32_t> all(n);
  std::iota(all.begin(), all.end(), 0u);
  std::shuffle(all.begin(), all.end(), rng);
  HostSparse s;
  s.idx.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(count, n)));
  std::sort(s.idx.begin(), s.idx.end());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::size_t i = 0; i < s.idx.size(); ++i) s.val.push_back(normal(rng));
  return s;
}

// Standard Gaussian values.
inline std::vector<float> Gaussian(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng);
  return x;
}

// Union of two sparse vectors through a std::map; values at a shared index are a + b.
inline HostSparse NaiveMerge(const HostSparse& a, const HostSparse& b) {
  std::map<std::uint32_t, float> sum;
  for (std::size_t i = 0; i < a.idx.size(); ++i) sum[a.idx[i]] = a.val[i];
  for (std::size_t i = 0; i < b.idx.size(); ++i) {
    auto it = sum.find(b.idx[i]);
    if (it == sum.end()) {
      sum[b.idx[i]] = b.val[i];
    } else {
      it->second = it->second + b.val[i];
    }
  }
  HostSparse out;
  for (const auto& [i, v] : sum) {
    out.idx.push_back(i);
    out.val.push_back(v);
  }
  return out;
}

// Positions of the k entries of largest |val| (ties: smaller position first), in rank order.
inline std::vector<std::size_t> NaiveTopKPositions(const std::vector<float>& val, std::size_t k) {
  std::vector<std::size_t> pos(val.size());
  std::iota(pos.begin(), pos.end(), std::size_t{0});
  std::stable_sort(pos.begin(), pos.end(),
                   [&](std::size_t a, std::size_t b) { return std::fabs(val[a]) > std::fabs(val[b]); });
  pos.resize(std::min(k, pos.size()));
  return pos;
}

// The k largest-|val| entries of a sparse vector, index-sorted.
inline HostSparse NaiveKeepTopK(const HostSparse& s, std::size_t k) {
  std::vector<std::pair<std::uint32_t, float>> kept;
  for (std::size_t p : NaiveTopKPositions(s.val, k)) kept.emplace_back(s.idx[p], s.val[p]);
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  HostSparse out;
  for (const auto& [i, v] : kept) {
    out.idx.push_back(i);
    out.val.push_back(v);
  }
  return out;
}

}  // namespace sketchps::testing
