// Test support for the local-momentum schemes (DGC, SDAGC): a naive host reference of the momentum
// correction state, a driver that runs one scheme instance alone through a round, the suites' layer
// tables and simulation options, and small helpers.
// Header-only; include after <catch2/catch.hpp>.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "common/layout.h"
#include "engine/scheme.h"
#include "kernels/backend.h"
#include "support/scheme_checks.h"
#include "support/simulation.h"

namespace sketchps::testing {

// u and v of one worker, updated with the same float operations in the same order as
// schemes/local_momentum.cc (no clipping). With m a power of two every product is exact, so a
// fused multiply-add anywhere would not change a bit either.
struct MomentumReference {
  MomentumReference(std::size_t dim, float m, bool nesterov) : u(dim, 0.0f), v(dim, 0.0f), m(m), nesterov(nesterov) {}

  void Accumulate(const std::vector<float>& g) {
    for (std::size_t i = 0; i < g.size(); ++i) {
      if (nesterov) {
        const float t = u[i] + g[i];
        u[i] = m * t;
        v[i] = (v[i] + u[i]) + g[i];
      } else {
        const float t = m * u[i];
        u[i] = t + g[i];
        v[i] = v[i] + u[i];
      }
    }
  }
  // v[i] = 0 at the sent indices; u[i] = 0 where mask(i).
  template <class Mask>
  void Take(const std::vector<std::uint32_t>& sent, Mask mask) {
    for (std::uint32_t i : sent) {
      v[i] = 0.0f;
      if (mask(i)) u[i] = 0.0f;
    }
  }

  std::vector<float> u, v;
  float m;
  bool nesterov;
};

// Runs one round of `scheme` as the only contributor; returns what it sent (the compressed phase's
// SparseVector, or the dense values of a warm-up round as a SparseVector over every index).
inline SparseVector DriveRound(Scheme& scheme, const std::vector<float>& g, std::uint64_t round, double epoch) {
  kernels::DeviceArray<float> d_g(g);
  const auto begun = scheme.BeginRound({round, epoch}, d_g.data());
  REQUIRE(begun.ok());
  REQUIRE(scheme.NumPhases() == 1);
  auto c = scheme.Contribute(0, nullptr);
  REQUIRE(c.ok());
  REQUIRE(c->payload.has_value());
  SparseVector sent;
  if (const auto* dense = std::get_if<DenseValues>(&*c->payload)) {
    sent.dim = g.size();
    for (std::uint32_t i = 0; i < g.size(); ++i) sent.idx.push_back(i);
    sent.val = dense->values;
    REQUIRE(scheme.Finish(PhaseResult{*dense, 1}).ok());
  } else {
    sent = std::get<SparseVector>(*c->payload);
    REQUIRE(scheme.Finish(PhaseResult{sent, 1}).ok());
  }
  return sent;
}

inline std::vector<float> Gaussian(std::size_t n, std::mt19937_64& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> out(n);
  for (auto& v : out) v = scale * normal(rng);
  return out;
}

// Indices of the k largest |x[lo, hi)| (no ties expected), as absolute positions.
inline std::set<std::uint32_t> TopKIndices(const std::vector<float>& x, std::size_t lo, std::size_t hi, std::size_t k) {
  std::vector<std::uint32_t> order;
  for (std::size_t i = lo; i < hi; ++i) order.push_back(static_cast<std::uint32_t>(i));
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](std::uint32_t a, std::uint32_t b) { return std::abs(x[a]) > std::abs(x[b]); });
  return {order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k)};
}

// The suites' simulated models: two matrices and a bias, whose two shards split at a layer boundary.
// d = 50: split at 25.
inline LayerTable Layers50() { return MakeLayerTable({{"w1", {5, 5}}, {"w2", {4, 5}}, {"b", {5}}}); }
// d = 30 (logistic): split at 15.
inline LayerTable Layers30() { return MakeLayerTable({{"w1", {3, 5}}, {"w2", {2, 5}}, {"b", {5}}}); }

// Simulation options for a local-momentum scheme: step 0.05 and no optimizer momentum (the scheme
// keeps its own), over `layers`.
inline SimOptions MomentumSimOptions(std::uint32_t workers, std::uint32_t shards, std::uint64_t rounds,
                                     LayerTable layers) {
  SimOptions o = SchemeOptions(workers, shards, rounds, /*lr=*/0.05, /*momentum=*/0.0);
  o.layers = std::move(layers);
  return o;
}

inline double HostNorm(const std::vector<float>& x, std::size_t lo, std::size_t hi) {
  double s = 0.0;
  for (std::size_t i = lo; i < hi; ++i) s += static_cast<double>(x[i]) * x[i];
  return std::sqrt(s);
}

}  // namespace sketchps::testing
