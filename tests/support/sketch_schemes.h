// Test support for the sketching schemes (gs-SGD, Sketched-SGD) and the other multi-worker top-k
// schemes (gTop-k, ScaleCom, SIDCo): a sequential driver that runs P scheme instances of one shard
// through a Reducer phase by phase (so tests see every payload, every phase result and the bytes of
// each phase), and naive host references (worker-order sums, top-k by magnitude with index
// tie-break, a Count Sketch built with host loops).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "common/count_sketch_hash.h"
#include "engine/phase.h"
#include "engine/reduce.h"
#include "engine/scheme.h"
#include "kernels/backend.h"

namespace sketchps::testing {

struct PhaseBytes {
  std::uint64_t up = 0;    // worker 0's payload, raw bytes
  std::uint64_t down = 0;  // the phase result, raw bytes
};

struct ManualRound {
  std::vector<Aggregate> aggregates;                               // per worker
  std::vector<PhaseBytes> bytes;                                   // per phase
  std::vector<std::vector<std::optional<PayloadValue>>> payloads;  // [phase][worker]
  std::vector<PhaseResult> results;                                // per phase
  std::vector<PhaseSpec> specs;                                    // per phase (every worker's: they agree)
};

// One round of every scheme (one per worker, all on the same shard) with the given gradients.
inline absl::StatusOr<ManualRound> RunManualRound(std::vector<std::unique_ptr<Scheme>>& schemes, Reducer& reducer,
                                                  std::uint64_t round, const std::vector<std::vector<float>>& grads) {
  std::vector<kernels::DeviceArray<float>> d_grads;
  for (std::size_t w = 0; w < schemes.size(); ++w) {
    d_grads.emplace_back(grads[w]);
    if (auto st = schemes[w]->BeginRound({round, 0.0}, d_grads.back().data()); !st.ok()) return st;
  }
  ManualRound out;
  for (std::uint32_t phase = 0; phase < schemes[0]->NumPhases(); ++phase) {
    const PhaseResult* previous = phase == 0 ? nullptr : &out.results.back();
    std::vector<Contribution> in;
    for (auto& s : schemes) {
      auto c = s->Contribute(phase, previous);
      if (!c.ok()) return c.status();
      if (!in.empty() && !(c->spec == in.front().spec)) {
        return absl::InternalError("workers disagree on the phase spec");
      }
      in.push_back(std::move(*c));
    }
    std::vector<const Contribution*> ptrs;
    out.payloads.emplace_back();
    for (const auto& c : in) {
      ptrs.push_back(&c);
      out.payloads.back().push_back(c.payload);
    }
    out.specs.push_back(in.front().spec);
    auto r = reducer.Reduce(in.front().spec, ptrs, previous);
    if (!r.ok()) return r.status();
    out.results.push_back(std::move(*r));
    out.bytes.push_back(
        {in.front().payload ? RawPayloadBytes(*in.front().payload) : 0, RawPayloadBytes(out.results.back().value)});
  }
  for (auto& s : schemes) {
    auto g = s->Finish(out.results.back());
    if (!g.ok()) return g.status();
    out.aggregates.push_back(std::move(*g));
  }
  return out;
}

// RunManualRound with a fresh Reducer over the gradients' dimension; the round must succeed.
inline ManualRound RequireManualRound(std::vector<std::unique_ptr<Scheme>>& schemes, std::uint64_t round,
                                      const std::vector<std::vector<float>>& grads) {
  Reducer reducer(grads.at(0).size());
  auto r = RunManualRound(schemes, reducer, round, grads);
  REQUIRE(r.ok());
  return *std::move(r);
}

inline std::vector<std::unique_ptr<Scheme>> MakeWorkers(
    std::uint32_t workers, std::uint64_t dim, std::uint64_t k, std::uint64_t seed,
    const std::function<std::unique_ptr<Scheme>(SchemeContext)>& factory) {
  std::vector<std::unique_ptr<Scheme>> out;
  for (std::uint32_t w = 0; w < workers; ++w) out.push_back(factory(SchemeContext{w, workers, 0, dim, {}, k, seed}));
  return out;
}

// Sum of the vectors in worker order, in float, starting from 0 (the reducer's order).
inline std::vector<float> SumInOrder(const std::vector<std::vector<float>>& xs) {
  std::vector<float> sum(xs.at(0).size(), 0.0f);
  for (const auto& x : xs) {
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += x[i];
  }
  return sum;
}

// Positions of the k largest |x| (ties: smaller index first), in rank order.
template <class T>
std::vector<std::uint32_t> NaiveTopKIndices(const std::vector<T>& x, std::size_t k) {
  std::vector<std::uint32_t> order(x.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return std::fabs(x[a]) > std::fabs(x[b]); });
  order.resize(std::min(k, order.size()));
  return order;
}

// The same positions, index-sorted.
template <class T>
std::vector<std::uint32_t> NaiveTopKSorted(const std::vector<T>& x, std::size_t k) {
  auto idx = NaiveTopKIndices(x, k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

// The k largest entries of sum / divisor as an index-sorted SparseVector over x.size().
inline SparseVector NaiveTopKMean(const std::vector<float>& sum, std::size_t k, float divisor) {
  const auto idx = NaiveTopKSorted(sum, k);
  SparseVector out{sum.size(), idx, {}};
  for (auto i : idx) out.val.push_back(sum[i] / divisor);
  return out;
}

// Count Sketch estimates of sum_w xs[w] by host loops (double), median over rows (odd rows).
inline std::vector<double> NaiveSketchEstimates(const CountSketchHash& hash,
                                                const std::vector<std::vector<float>>& xs) {
  const std::uint64_t d = hash.dim();
  std::vector<double> table(hash.cells(), 0.0);
  for (const auto& x : xs) {
    for (std::uint32_t j = 0; j < hash.rows(); ++j) {
      for (std::uint32_t i = 0; i < d; ++i)
        table[std::uint64_t{j} * hash.cols() + hash.Bucket(j, i)] += hash.Sign(j, i) * double{x[i]};
    }
  }
  std::vector<double> est(d);
  std::vector<double> rows(hash.rows());
  for (std::uint32_t i = 0; i < d; ++i) {
    for (std::uint32_t j = 0; j < hash.rows(); ++j)
      rows[j] = hash.Sign(j, i) * table[std::uint64_t{j} * hash.cols() + hash.Bucket(j, i)];
    std::sort(rows.begin(), rows.end());
    est[i] = rows[(rows.size() - 1) / 2];
  }
  return est;
}

// Heavy-tailed random gradients: N(0, 1) with a few planted spikes per worker.
inline std::vector<float> RandomGradient(std::uint64_t dim, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<std::uint64_t> pos(0, dim - 1);
  std::vector<float> g(dim);
  for (auto& v : g) v = normal(rng);
  for (int s = 0; s < 3; ++s) g[pos(rng)] += 8.0f * normal(rng);
  return g;
}

// One round of `workers` instances of a sketching scheme (gs-SGD, Sketched-SGD) built with p2 = `p2`,
// keep: top_k and f32 tables at d = 1000, k = 10 (r = 5 rows, c = 10k = 100 columns): worker 0 sends
// the r x c sketch, 4 bytes a cell. With p2 = 0 the k (index, value) pairs come back, 8 bytes each;
// otherwise the p2 k candidates come back as an index set (4 raw bytes each), each worker sends its
// values there (4 bytes each), and the k kept pairs come back.
inline void CheckSketchPhaseBytes(std::uint32_t workers, std::uint32_t p2,
                                  const std::function<std::unique_ptr<Scheme>(SchemeContext)>& factory) {
  const std::uint64_t d = 1000, k = 10;
  auto schemes = MakeWorkers(workers, d, k, 4, factory);
  std::mt19937_64 rng(p2);
  std::vector<std::vector<float>> g(workers);
  for (auto& x : g) x = RandomGradient(d, rng);
  const auto r = RequireManualRound(schemes, 0, g);
  INFO("p2 = " << p2);
  CHECK(r.bytes[0].up == 5 * 100 * 4);
  if (p2 == 0) {
    REQUIRE(r.bytes.size() == 1);
    CHECK(r.bytes[0].down == 8 * k);
    return;
  }
  REQUIRE(r.bytes.size() == 2);
  CHECK(r.bytes[0].down == 4 * p2 * k);
  CHECK(r.bytes[1].up == 4 * p2 * k);
  CHECK(r.bytes[1].down == 8 * k);
}

// Three rounds on one worker (d = 80, k = 8), then its saved state restored into a fresh worker:
// the state reads back equal, and the next round both send the same payloads and end in the same
// state. Returns the restored worker, for the scheme's own bad-state checks.
inline std::unique_ptr<Scheme> CheckStateRoundTrip(
    const std::function<std::unique_ptr<Scheme>(SchemeContext)>& factory) {
  const std::uint64_t d = 80, k = 8;
  auto a = MakeWorkers(1, d, k, 2, factory);
  auto b = MakeWorkers(1, d, k, 2, factory);
  std::mt19937_64 rng(8);
  for (std::uint64_t round = 0; round < 3; ++round) RequireManualRound(a, round, {RandomGradient(d, rng)});
  const SchemeState saved = a[0]->SaveState();
  REQUIRE(b[0]->RestoreState(saved).ok());
  CHECK(b[0]->SaveState().arrays == saved.arrays);
  const std::vector<std::vector<float>> g = {RandomGradient(d, rng)};
  CHECK(RequireManualRound(a, 3, g).payloads == RequireManualRound(b, 3, g).payloads);
  CHECK(a[0]->SaveState().arrays == b[0]->SaveState().arrays);
  return std::move(b[0]);
}

// The aggregate of a two-phase round: among the candidates `cand` (index-sorted), the k largest
// |sum| (ties: smaller index), each as the mean sum / workers, bitwise.
inline void CheckExactTopKAmong(const SparseVector& got, const std::vector<std::uint32_t>& cand,
                                const std::vector<float>& sum, std::size_t k, std::uint32_t workers) {
  std::vector<float> at_cand;
  for (auto i : cand) at_cand.push_back(sum[i]);
  const auto keep = NaiveTopKSorted(at_cand, k);
  REQUIRE(got.idx.size() == k);
  for (std::size_t t = 0; t < k; ++t) {
    CHECK(got.idx[t] == cand[keep[t]]);
    CHECK(got.val[t] == sum[cand[keep[t]]] / static_cast<float>(workers));
  }
}

}  // namespace sketchps::testing
