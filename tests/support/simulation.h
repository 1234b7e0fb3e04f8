// Simulated data-parallel training for scheme tests: P workers as threads, S shards, the in-process
// aggregator and the replicated optimizer, on problems with a known optimum. Header-only.
//
//   auto result = Simulate(factory, problem, options);
//   result.replicas_identical, result.weights (worker 0), result.traffic, result.skipped_rounds...
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "common/layout.h"
#include "common/status.h"
#include "engine/in_process.h"
#include "engine/optimizer.h"
#include "engine/replica.h"
#include "engine/round.h"
#include "engine/scheme.h"
#include "kernels/backend.h"

namespace sketchps::testing {

// A differentiable objective whose data is partitioned across workers.
class Problem {
 public:
  virtual ~Problem() = default;
  virtual std::uint64_t dim() const = 0;
  // Mean gradient over the rows this worker uses in this round, at weights w.
  virtual void Gradient(const std::vector<float>& w, std::uint32_t worker, std::uint32_t workers, std::uint64_t round,
                        std::vector<float>& g) const = 0;
  virtual double Loss(const std::vector<float>& w) const = 0;
};

// 0.5 * mean_i (a_i . w - b_i)^2 with b = A x*: the optimum is x* exactly. Rows are N(0, I), so
// with rows >= 4 * dim the Hessian's eigenvalues lie in about [0.25, 2.25] (well conditioned).
// batch == 0: each worker uses all its rows (i mod P == worker) every round (deterministic GD);
// batch > 0: worker w uses global rows (round * P * batch + w * batch + j) mod N, j < batch, so P
// workers with batch b see exactly the rows one process with batch P*b sees.
class LeastSquares final : public Problem {
 public:
  LeastSquares(std::uint64_t rows, std::uint64_t dim, std::uint64_t seed, std::uint64_t batch = 0)
      : n_(rows), d_(dim), batch_(batch), a_(rows * dim), b_(rows), x_star_(dim) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& v : x_star_) v = normal(rng);
    for (auto& v : a_) v = normal(rng);
    for (std::uint64_t i = 0; i < n_; ++i) {
      double s = 0;
      for (std::uint64_t j = 0; j < d_; ++j) s += a_[i * d_ + j] * x_star_[j];
      b_[i] = static_cast<float>(s);
    }
  }
  std::uint64_t dim() const override { return d_; }
  const std::vector<float>& optimum() const { return x_star_; }

  void Gradient(const std::vector<float>& w, std::uint32_t worker, std::uint32_t workers, std::uint64_t round,
                std::vector<float>& g) const override {
    g.assign(d_, 0.0f);
    std::uint64_t used = 0;
    auto add_row = [&](std::uint64_t i) {
      double r = -b_[i];
      for (std::uint64_t j = 0; j < d_; ++j) r += a_[i * d_ + j] * w[j];
      for (std::uint64_t j = 0; j < d_; ++j) g[j] += static_cast<float>(r * a_[i * d_ + j]);
      ++used;
    };
    if (batch_ == 0) {
      for (std::uint64_t i = worker; i < n_; i += workers) add_row(i);
    } else {
      for (std::uint64_t j = 0; j < batch_; ++j) add_row((round * workers * batch_ + worker * batch_ + j) % n_);
    }
    for (auto& v : g) v /= static_cast<float>(used);
  }
  double Loss(const std::vector<float>& w) const override {
    double s = 0;
    for (std::uint64_t i = 0; i < n_; ++i) {
      double r = -b_[i];
      for (std::uint64_t j = 0; j < d_; ++j) r += a_[i * d_ + j] * w[j];
      s += 0.5 * r * r;
    }
    return s / static_cast<double>(n_);
  }

 private:
  std::uint64_t n_, d_, batch_;
  std::vector<float> a_, b_, x_star_;
};

// L2-regularized logistic regression, labels drawn from a logistic model; full local batches.
// Its optimum is computed by ReferenceOptimum() (long full-batch gradient descent in double).
class Logistic final : public Problem {
 public:
  Logistic(std::uint64_t rows, std::uint64_t dim, double l2, std::uint64_t seed)
      : n_(rows), d_(dim), l2_(l2), a_(rows * dim), y_(rows) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> w(dim);
    for (auto& v : w) v = normal(rng);
    for (auto& v : a_) v = normal(rng) / std::sqrt(static_cast<double>(dim));
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (std::uint64_t i = 0; i < n_; ++i) y_[i] = u(rng) < Sigmoid(Dot(i, w)) ? 1.0 : 0.0;
  }
  std::uint64_t dim() const override { return d_; }
  void Gradient(const std::vector<float>& w, std::uint32_t worker, std::uint32_t workers, std::uint64_t,
                std::vector<float>& g) const override {
    std::vector<double> wd(w.begin(), w.end()), gd(d_, 0.0);
    std::uint64_t used = 0;
    for (std::uint64_t i = worker; i < n_; i += workers, ++used) AddRowGradient(i, wd, gd);
    g.resize(d_);
    for (std::uint64_t j = 0; j < d_; ++j) g[j] = static_cast<float>(gd[j] / used + l2_ * wd[j]);
  }
  double Loss(const std::vector<float>& w) const override {
    std::vector<double> wd(w.begin(), w.end());
    double s = 0, reg = 0;
    for (std::uint64_t i = 0; i < n_; ++i) {
      const double z = Dot(i, wd);
      s += std::log1p(std::exp(-std::abs(z))) + std::max(z, 0.0) - y_[i] * z;
    }
    for (double v : wd) reg += 0.5 * l2_ * v * v;
    return s / static_cast<double>(n_) + reg;
  }
  // The optimum, by full-batch gradient descent in double until the gradient norm is < 1e-10.
  std::vector<float> ReferenceOptimum() const {
    std::vector<double> w(d_, 0.0);
    for (int it = 0; it < 200000; ++it) {
      std::vector<double> g(d_, 0.0);
      for (std::uint64_t i = 0; i < n_; ++i) AddRowGradient(i, w, g);
      double norm = 0;
      for (std::uint64_t j = 0; j < d_; ++j) {
        g[j] = g[j] / n_ + l2_ * w[j];
        norm += g[j] * g[j];
      }
      if (std::sqrt(norm) < 1e-10) break;
      for (std::uint64_t j = 0; j < d_; ++j) w[j] -= 1.0 * g[j];
    }
    return std::vector<float>(w.begin(), w.end());
  }

 private:
  static double Sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }
  template <class W>
  double Dot(std::uint64_t i, const W& w) const {
    double s = 0;
    for (std::uint64_t j = 0; j < d_; ++j) s += a_[i * d_ + j] * w[j];
    return s;
  }
  void AddRowGradient(std::uint64_t i, const std::vector<double>& w, std::vector<double>& g) const {
    const double r = Sigmoid(Dot(i, w)) - y_[i];
    for (std::uint64_t j = 0; j < d_; ++j) g[j] += r * a_[i * d_ + j];
  }
  std::uint64_t n_, d_;
  double l2_;
  std::vector<double> a_, y_;
};

using SchemeFactory = std::function<std::unique_ptr<Scheme>(SchemeContext)>;

struct SimOptions {
  std::uint32_t workers = 4;
  std::uint32_t shards = 1;
  std::uint64_t rounds = 100;
  double density = 0.1;  // k per shard = max(1, density * range size)
  std::uint64_t seed = 7;
  OptimizerConfig optimizer;
  double rounds_per_epoch = 10;  // RoundInfo::epoch = round / rounds_per_epoch
  LayerTable layers;             // default: one layer "w" of problem.dim()
  // Optional: corrupt a worker's gradient (e.g. inject NaN) before it is compressed.
  std::function<void(std::uint32_t worker, std::uint64_t round, std::vector<float>& g)> tamper;
};

struct SimResult {
  std::vector<std::vector<float>> replicas;   // final weights of every worker
  bool replicas_identical = false;            // after every round on every worker, and the shards' master copy
  std::vector<float> master;                  // the shards' master copies, concatenated
  std::vector<RoundTraffic> traffic;          // per round, summed over shards, worker 0
  std::vector<std::uint64_t> selected;        // per round, summed over shards, worker 0
  std::vector<RoundDiagnostics> diagnostics;  // per round, summed over shards, worker 0
  std::vector<std::uint64_t> checksums;       // per round, of the weights after the update
  std::uint64_t skipped_rounds = 0;           // rounds any worker skipped (NaN guard)
  absl::Status status;                        // first error of any worker
};

// FNV-1a over the bytes of the weights: equal exactly when the replicas are bitwise equal (w.h.p.).
inline std::uint64_t Checksum(const std::vector<float>& w) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(w.data());
  for (std::size_t i = 0; i < w.size() * sizeof(float); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

inline double RelativeError(const std::vector<float>& w, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    num += (w[i] - ref[i]) * static_cast<double>(w[i] - ref[i]);
    den += ref[i] * static_cast<double>(ref[i]);
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

namespace internal {

inline absl::Status RunWorker(std::uint32_t w, const SchemeFactory& factory, const Problem& problem,
                              const SimOptions& o, const ShardMap& map, const LayerTable& layers, bool global_momentum,
                              InProcessHub& hub, SimResult& result, std::vector<float>& weights) {
#if defined(_OPENMP)
  omp_set_num_threads(1);  // per-thread setting: the simulated workers already are the parallelism
#endif
  auto agg = hub.MakeAggregator(w, absl::Seconds(30));
  SKETCHPS_ASSIGN_OR_RETURN(auto replica, Replica::Create(ReplicaOptions{w, o.workers, map, layers, factory, o.density,
                                                                         global_momentum, o.optimizer, o.seed,
                                                                         /*parallel_shards=*/false}));
  kernels::DeviceArray<float> d_w(weights), d_g(problem.dim());
  std::vector<float> g;
  for (std::uint64_t round = 0; round < o.rounds; ++round) {
    weights = d_w.ToHost();
    problem.Gradient(weights, w, o.workers, round, g);
    if (o.tamper) o.tamper(w, round, g);
    d_g.FromHost(g);
    const RoundInfo info{round, EpochOfRound(round, o.rounds_per_epoch)};
    SKETCHPS_ASSIGN_OR_RETURN(ReplicaRound out, replica->RunRound(*agg, info, d_g.data(), d_w.data()));
    if (replica->scheme(0).skipped()) ++result.skipped_rounds;  // counted once per worker-round
    result.traffic.push_back(out.traffic);
    result.selected.push_back(out.selected);
    result.diagnostics.push_back(out.diagnostics);
    result.checksums.push_back(Checksum(d_w.ToHost()));
  }
  weights = d_w.ToHost();
  return absl::OkStatus();
}

}  // namespace internal

// Runs the simulation; every worker starts from zero weights.
inline SimResult Simulate(const SchemeFactory& factory, const Problem& problem, const SimOptions& o) {
  SimResult result;
  const LayerTable layers =
      o.layers.layers.empty() ? MakeLayerTable({{"w", {static_cast<std::int64_t>(problem.dim())}}}) : o.layers;
  auto map = MakeShardMap(layers, o.shards);
  if (!map.ok()) {
    result.status = map.status();
    return result;
  }
  const bool global_momentum = factory(SchemeContext{0, o.workers, 0, 1, {}, 1, o.seed})->uses_global_momentum();
  InProcessHub hub(o.workers, *map, std::vector<float>(problem.dim(), 0.0f), o.optimizer, global_momentum,
                   o.rounds_per_epoch);
  result.replicas.assign(o.workers, std::vector<float>(problem.dim(), 0.0f));
  std::vector<absl::Status> statuses(o.workers);
  std::vector<SimResult> per_worker(o.workers);
  std::vector<std::thread> threads;
  for (std::uint32_t w = 0; w < o.workers; ++w) {
    threads.emplace_back([&, w] {
      statuses[w] = internal::RunWorker(w, factory, problem, o, *map, layers, global_momentum, hub, per_worker[w],
                                        result.replicas[w]);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& s : statuses) {
    if (!s.ok() && result.status.ok()) result.status = s;
  }
  result.traffic = per_worker[0].traffic;
  result.selected = per_worker[0].selected;
  result.diagnostics = per_worker[0].diagnostics;
  for (const auto& p : per_worker) result.skipped_rounds += p.skipped_rounds;
  result.replicas_identical = true;
  for (const auto& p : per_worker) result.replicas_identical &= p.checksums == per_worker[0].checksums;
  for (const auto& r : result.replicas) result.replicas_identical &= r == result.replicas[0];
  result.master = hub.MasterWeights();
  result.replicas_identical &= result.master == result.replicas[0];
  return result;
}

}  // namespace sketchps::testing
