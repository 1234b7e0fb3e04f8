// Synthetic gradients for the load generator (`sketchps loadgen`, bench/loadgen/loadgen.h): P workers' flat
// gradients with a controlled overlap of their heavy hitters, without a model.
//
// Worker w's gradient in round t, element i:
//
//   g[i] = scale * (sqrt(rho) * X_t[i] + sqrt(1 - rho) * Y_{t,w}[i])
//
// X_t (shared by every worker) and Y_{t,w} (one per worker) are independent Student-t samples with
// 3 degrees of freedom (heavy tails, finite variance 3), so rho is the correlation between any two
// workers' gradients. rho = 1: identical gradients (the union of the workers' top-k sets is k);
// rho = 0: independent ones (the union is about d (1 - (1 - k/d)^P)). Every round draws new X and Y
// from seeded SplitMix64 streams (seed, round, worker), so a run is deterministic and two runs with
// the same seed send the same payloads.
//
// Calibration (kDefaultCorrelation): the real gradients the default job's workers dump (CNN,
// 220,234 parameters, 2 shards, rounds 10, 100 and 300 of `sketchps run --dump-gradients`) have a
// union of the 4 workers' top-k sets (density 0.01) of ~2.8 k per shard, where k = 1,101. The
// default rho is the value at which this generator gives the same union at P = 4, density 0.01
// (CalibrateCorrelation; `sketchps loadgen --calibrate` prints the table; docs/reports/scaling.md).
//
// Not a model of gradient dynamics: no layer structure in the magnitudes, no correlation over rounds.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/layout.h"
#include "common/splitmix.h"

namespace sketchps::bench {

// rho such that the union of 4 workers' top-k sets (density 0.01) is 2.8 k per shard on the default
// job's layout; see the header comment.
inline constexpr double kDefaultCorrelation = 0.5;
// The union per shard, as a multiple of k, that kDefaultCorrelation reproduces (P = 4, density 0.01).
inline constexpr double kCalibrationUnionOverK = 2.8;

// Student-t with 3 degrees of freedom from a SplitMix64 stream (Bailey's polar method: for (u, v)
// uniform in the unit disc, w = u^2 + v^2, t = u * sqrt(3 (w^(-2/3) - 1) / w)).
class StudentT3 {
 public:
  explicit StudentT3(std::uint64_t seed) : rng_(seed) {}
  float Next();

 private:
  SplitMix64Rng rng_;
};

// The seed of one stream: stream 0 is a round's shared component, stream w + 1 worker w's own.
std::uint64_t StreamSeed(std::uint64_t seed, std::uint64_t round, std::uint64_t stream);

struct SyntheticOptions {
  std::uint64_t dim = 0;
  double correlation = kDefaultCorrelation;  // rho in [0, 1]
  std::uint64_t seed = 1;
  float scale = 1e-3f;  // gradient-like magnitudes
};

class SyntheticGradients {
 public:
  explicit SyntheticGradients(const SyntheticOptions& options);

  // Draws round `round`'s shared component. Call before Worker() for that round; not concurrently
  // with Worker().
  void BeginRound(std::uint64_t round);
  // Writes worker w's gradient of the current round (out.size() == dim). Thread-safe between calls
  // of BeginRound (reads the shared component only).
  void Worker(std::uint32_t worker, std::span<float> out) const;

  std::uint64_t dim() const { return options_.dim; }
  std::uint64_t round() const { return round_; }

 private:
  SyntheticOptions options_;
  std::uint64_t round_ = 0;
  std::vector<float> shared_;  // sqrt(rho) * X_round
};

// k per shard range as Replica computes it: max(1, floor(density * range length)).
std::uint64_t KOfRange(double density, std::uint64_t length);

// Per shard range: the number of distinct indices in the union of the workers' top-k sets (k =
// KOfRange; top-k by |g|, ties by the smaller index). Every gradient covers the whole vector.
std::vector<std::uint64_t> TopKUnionPerShard(const std::vector<std::vector<float>>& gradients, const ShardMap& shards,
                                             double density);

struct CalibrationPoint {
  double correlation = 0;
  double union_over_k = 0;  // mean over shards and rounds of union / k
};
// The union (as a multiple of k, mean over shards and `rounds` rounds) of `workers` synthetic
// workers' top-k sets for each correlation in `correlations`.
std::vector<CalibrationPoint> UnionCurve(const std::vector<double>& correlations, const ShardMap& shards,
                                         std::uint32_t workers, double density, std::uint64_t seed,
                                         std::uint64_t rounds);
// The correlation (bisection on [0, 1], to 1e-3) at which UnionCurve gives `target_union_over_k`.
double CalibrateCorrelation(double target_union_over_k, const ShardMap& shards, std::uint32_t workers, double density,
                            std::uint64_t seed, std::uint64_t rounds);

}  // namespace sketchps::bench
