// The load generator's synthetic gradients (bench/loadgen/synth.h) against independent references:
// the Student-t(3) CDF in closed form, a full-sort top-k union, the union of independent random
// k-sets, and the calibration target (union of 4 workers' top-k sets ~2.8 k per shard at density
// 0.01 on the default job's layout).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include "bench/loadgen/synth.h"
#include "common/layout.h"
#include "job/model_layout.h"

namespace sketchps::bench {
namespace {

LayerTable FlatLayers(std::uint64_t dim) { return MakeLayerTable({{"flat", {static_cast<std::int64_t>(dim)}}}); }

// F(t) of Student's t with 3 degrees of freedom.
double T3Cdf(double t) {
  const double x = t / std::sqrt(3.0);
  return 0.5 + (x / (1.0 + x * x) + std::atan(x)) / M_PI;
}

// Union of the top-k sets by a full sort (|g| descending, index ascending), per shard.
std::vector<std::uint64_t> ReferenceUnion(const std::vector<std::vector<float>>& grads, const ShardMap& shards,
                                          double density) {
  std::vector<std::uint64_t> out;
  for (const auto& r : shards.ranges) {
    const std::uint64_t k =
        std::max<std::uint64_t>(1, static_cast<std::uint64_t>(density * static_cast<double>(r.size())));
    std::set<std::uint64_t> all;
    for (const auto& g : grads) {
      std::vector<std::uint64_t> idx(r.size());
      std::iota(idx.begin(), idx.end(), 0);
      std::stable_sort(idx.begin(), idx.end(), [&](std::uint64_t a, std::uint64_t b) {
        return std::fabs(g[r.lo + a]) > std::fabs(g[r.lo + b]);
      });
      all.insert(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k));
    }
    out.push_back(all.size());
  }
  return out;
}

std::vector<std::vector<float>> Draw(SyntheticGradients& gen, std::uint64_t round, std::uint32_t workers) {
  gen.BeginRound(round);
  std::vector<std::vector<float>> grads(workers, std::vector<float>(gen.dim()));
  for (std::uint32_t w = 0; w < workers; ++w) gen.Worker(w, grads[w]);
  return grads;
}

TEST_CASE("StudentT3 samples follow the t distribution with 3 degrees of freedom") {
  StudentT3 t(42);
  std::vector<double> x(200000);
  for (auto& v : x) v = t.Next();
  std::sort(x.begin(), x.end());
  double ks = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double f = T3Cdf(x[i]);
    ks = std::max(
        {ks, std::fabs(f - static_cast<double>(i) / x.size()), std::fabs(f - static_cast<double>(i + 1) / x.size())});
  }
  // The Kolmogorov-Smirnov 99.9% critical value for n = 200,000 is 1.95 / sqrt(n) = 0.0044.
  CHECK(ks < 0.0044);
  // Heavy tails: P(|t| > 10) = 2 (1 - F(10)) = 0.0021 (a Gaussian would give 1.5e-23).
  const auto beyond = std::count_if(x.begin(), x.end(), [](double v) { return std::fabs(v) > 10; });
  CHECK(static_cast<double>(beyond) / x.size() == Approx(2 * (1 - T3Cdf(10))).epsilon(0.15));
}

TEST_CASE("Synthetic gradients are deterministic per seed, round and worker") {
  SyntheticGradients a(SyntheticOptions{5000, 0.5, 7});
  SyntheticGradients b(SyntheticOptions{5000, 0.5, 7});
  SyntheticGradients c(SyntheticOptions{5000, 0.5, 8});
  const auto ga = Draw(a, 3, 3), gb = Draw(b, 3, 3), gc = Draw(c, 3, 3);
  CHECK(ga == gb);
  CHECK(ga[0] != gc[0]);
  CHECK(ga[0] != ga[1]);
  const auto next = Draw(a, 4, 3);
  CHECK(next[0] != ga[0]);
  for (const auto& g : ga) CHECK(std::all_of(g.begin(), g.end(), [](float v) { return std::isfinite(v); }));
}

TEST_CASE("Correlation 1 gives identical gradients and a union of exactly k") {
  const LayerTable layers = FlatLayers(20000);
  const ShardMap shards = *MakeShardMap(layers, 2);
  SyntheticGradients gen(SyntheticOptions{20000, 1.0, 3});
  const auto grads = Draw(gen, 0, 4);
  for (std::uint32_t w = 1; w < 4; ++w) CHECK(grads[w] == grads[0]);
  const auto unions = TopKUnionPerShard(grads, shards, 0.01);
  CHECK(unions == std::vector<std::uint64_t>{100, 100});
}

TEST_CASE("Correlation 0 gives the union of independent random k-sets") {
  // P independent k-sets of d: E|union| = d (1 - (1 - k/d)^P).
  const std::uint64_t d_shard = 50000;
  const ShardMap shards = *MakeShardMap(FlatLayers(2 * d_shard), 2);
  SyntheticGradients gen(SyntheticOptions{2 * d_shard, 0.0, 11});
  const std::uint32_t p = 8;
  const auto unions = TopKUnionPerShard(Draw(gen, 0, p), shards, 0.02);
  const double k = 1000, expected = d_shard * (1 - std::pow(1 - k / d_shard, p));
  for (auto u : unions) CHECK(static_cast<double>(u) == Approx(expected).epsilon(0.02));
}

TEST_CASE("TopKUnionPerShard equals a full-sort reference") {
  const LayerTable layers = FlatLayers(30001);
  const ShardMap shards = *MakeShardMap(layers, 3);
  SyntheticGradients gen(SyntheticOptions{30001, 0.4, 5});
  const auto grads = Draw(gen, 2, 5);
  CHECK(TopKUnionPerShard(grads, shards, 0.01) == ReferenceUnion(grads, shards, 0.01));
}

TEST_CASE("The default correlation reproduces the real gradients' union at P 4 and density 0.01") {
  // The default job's CNN, 2 shards: k = 1,101 per shard. Real dumps give 2.5 k .. 3.0 k (mean
  // 2.78 k over rounds 10, 100, 300); the generator is calibrated to 2.8 k.
  const LayerTable cnn = *ModelLayout("cnn");
  const ShardMap shards = *MakeShardMap(cnn, 2);
  SyntheticGradients gen(SyntheticOptions{cnn.dim(), kDefaultCorrelation, 1});
  double sum = 0;
  int n = 0;
  for (std::uint64_t round = 0; round < 2; ++round) {
    const auto grads = Draw(gen, round, 4);
    const auto unions = ReferenceUnion(grads, shards, 0.01);
    for (std::size_t s = 0; s < unions.size(); ++s) {
      sum += static_cast<double>(unions[s]) / static_cast<double>(KOfRange(0.01, shards.ranges[s].size()));
      ++n;
    }
  }
  CHECK(sum / n == Approx(kCalibrationUnionOverK).epsilon(0.05));
  // And the union shrinks as the correlation grows.
  const auto curve = UnionCurve({0.2, 0.5, 0.8}, shards, 4, 0.01, 1, 1);
  CHECK(curve[0].union_over_k > curve[1].union_over_k);
  CHECK(curve[1].union_over_k > curve[2].union_over_k);
}

}  // namespace
}  // namespace sketchps::bench
