#include "bench/loadgen/synth.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sketchps::bench {

float StudentT3::Next() {
  for (;;) {
    const std::uint64_t bits = rng_.Next();
    // Two 32-bit uniforms in (-1, 1).
    const double u = (static_cast<double>(bits >> 32) + 0.5) * (2.0 / 4294967296.0) - 1.0;
    const double v = (static_cast<double>(bits & 0xffffffffull) + 0.5) * (2.0 / 4294967296.0) - 1.0;
    const double w = u * u + v * v;
    if (w >= 1.0 || w <= 0.0) continue;
    const double c = std::cbrt(w);  // w^(-2/3) = 1 / c^2
    return static_cast<float>(u * std::sqrt(3.0 * (1.0 / (c * c) - 1.0) / w));
  }
}

std::uint64_t StreamSeed(std::uint64_t seed, std::uint64_t round, std::uint64_t stream) {
  return SplitMix64(SplitMix64(SplitMix64(seed) ^ round) ^ (stream * 0x9E3779B97F4A7C15ull + 0x5851F42D4C957F2Dull));
}

SyntheticGradients::SyntheticGradients(const SyntheticOptions& options) : options_(options), shared_(options.dim) {}

void SyntheticGradients::BeginRound(std::uint64_t round) {
  round_ = round;
  StudentT3 t(StreamSeed(options_.seed, round, 0));
  const float a = static_cast<float>(std::sqrt(std::clamp(options_.correlation, 0.0, 1.0)));
  for (auto& x : shared_) x = a * t.Next();
}

void SyntheticGradients::Worker(std::uint32_t worker, std::span<float> out) const {
  StudentT3 t(StreamSeed(options_.seed, round_, std::uint64_t{worker} + 1));
  const float b = static_cast<float>(std::sqrt(1.0 - std::clamp(options_.correlation, 0.0, 1.0)));
  const float scale = options_.scale;
  const std::size_t n = std::min<std::size_t>(out.size(), shared_.size());
  for (std::size_t i = 0; i < n; ++i) out[i] = scale * (shared_[i] + b * t.Next());
}

std::uint64_t KOfRange(double density, std::uint64_t length) {
  return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(density * static_cast<double>(length)));
}

std::vector<std::uint64_t> TopKUnionPerShard(const std::vector<std::vector<float>>& gradients, const ShardMap& shards,
                                             double density) {
  std::vector<std::uint64_t> out;
  for (const auto& r : shards.ranges) {
    const std::uint64_t n = r.size();
    const std::uint64_t k = std::min(n, KOfRange(density, n));
    std::vector<char> in_union(n, 0);
    std::vector<std::uint32_t> order(n);
    for (const auto& g : gradients) {
      std::iota(order.begin(), order.end(), 0u);
      const float* x = g.data() + r.lo;
      auto larger = [x](std::uint32_t a, std::uint32_t b) {
        const float fa = std::fabs(x[a]), fb = std::fabs(x[b]);
        return fa > fb || (fa == fb && a < b);
      };
      std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k - 1), order.end(), larger);
      for (std::uint64_t j = 0; j < k; ++j) in_union[order[j]] = 1;
    }
    out.push_back(static_cast<std::uint64_t>(std::count(in_union.begin(), in_union.end(), 1)));
  }
  return out;
}

std::vector<CalibrationPoint> UnionCurve(const std::vector<double>& correlations, const ShardMap& shards,
                                         std::uint32_t workers, double density, std::uint64_t seed,
                                         std::uint64_t rounds) {
  const std::uint64_t dim = shards.ranges.empty() ? 0 : shards.ranges.back().hi;
  std::vector<CalibrationPoint> curve;
  for (double rho : correlations) {
    SyntheticGradients gen(SyntheticOptions{dim, rho, seed});
    double sum = 0;
    std::uint64_t count = 0;
    std::vector<std::vector<float>> grads(workers, std::vector<float>(dim));
    for (std::uint64_t t = 0; t < rounds; ++t) {
      gen.BeginRound(t);
      for (std::uint32_t w = 0; w < workers; ++w) gen.Worker(w, grads[w]);
      const auto unions = TopKUnionPerShard(grads, shards, density);
      for (std::size_t s = 0; s < unions.size(); ++s) {
        sum += static_cast<double>(unions[s]) / static_cast<double>(KOfRange(density, shards.ranges[s].size()));
        ++count;
      }
    }
    curve.push_back(CalibrationPoint{rho, count ? sum / static_cast<double>(count) : 0.0});
  }
  return curve;
}

double CalibrateCorrelation(double target_union_over_k, const ShardMap& shards, std::uint32_t workers, double density,
                            std::uint64_t seed, std::uint64_t rounds) {
  // The union shrinks as the correlation grows.
  double lo = 0.0, hi = 1.0;
  while (hi - lo > 1e-3) {
    const double mid = 0.5 * (lo + hi);
    const double u = UnionCurve({mid}, shards, workers, density, seed, rounds)[0].union_over_k;
    (u > target_union_over_k ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace sketchps::bench
