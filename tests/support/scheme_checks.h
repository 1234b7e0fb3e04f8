// Checks every scheme test suite repeats, written once (a small conformance helper): the suites'
// simulation options, convergence on the shared least-squares and logistic problems, equality with a
// reference scheme (dense, top-k+EF), and the NaN guard. Each check asserts; the suites keep their
// scheme-specific cases and call these with their own factories and options.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "job/job_spec.h"
#include "schemes/dense.h"
#include "support/simulation.h"

namespace sketchps::testing {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// P workers, S shards, `rounds` rounds, step `lr` and optimizer momentum `momentum`; everything else
// as SimOptions' defaults.
inline SimOptions SchemeOptions(std::uint32_t workers, std::uint32_t shards, std::uint64_t rounds, double lr = 0.05,
                                double momentum = 0.5) {
  SimOptions o;
  o.workers = workers;
  o.shards = shards;
  o.rounds = rounds;
  o.optimizer.lr.base_lr = lr;
  o.optimizer.momentum = momentum;
  return o;
}

// The error of parsing a job whose scheme is `name` with the section `section` (YAML flow text), or
// "" when the job parses.
inline std::string SchemeConfigError(const std::string& name, const std::string& section) {
  auto job = ParseJobSpec("scheme: {name: " + name + ", " + name + ": " + section + "}\n", "t.yaml", {});
  return job.ok() ? "" : std::string(job.status().message());
}

inline SchemeFactory Dense() {
  return [](SchemeContext ctx) { return MakeDenseScheme(std::move(ctx)); };
}

// A cosine-decayed step over the whole run: with error feedback and P > 1 the workers' local
// gradients differ at the optimum, so only a decaying step converges to it.
inline void UseCosineSchedule(SimOptions& o) {
  o.optimizer.lr.kind = LrSchedule::Kind::kCosine;
  o.optimizer.lr.total_epochs = static_cast<double>(o.rounds) / o.rounds_per_epoch;
}

// Simulates `factory` on `problem`; the run must succeed, keep every replica (and the master copy)
// identical, and end within relative error `tolerance` of `optimum`. Returns the run for further checks.
inline SimResult ExpectConverges(const SchemeFactory& factory, const Problem& problem, const SimOptions& opts,
                                 const std::vector<float>& optimum, double tolerance) {
  auto r = Simulate(factory, problem, opts);
  REQUIRE(r.status.ok());
  CHECK(r.replicas_identical);
  const double err = RelativeError(r.replicas[0], optimum);
  double selected = 0;  // worker 0's mean selected fraction over the second half of the run
  for (std::size_t i = r.selected.size() / 2; i < r.selected.size(); ++i)
    selected += static_cast<double>(r.selected[i]);
  selected /= static_cast<double>(r.selected.size() - r.selected.size() / 2) * static_cast<double>(problem.dim());
  INFO("P = " << opts.workers << ", relative error " << err << ", selected fraction " << selected);
  CHECK(err < tolerance);
  return r;
}

// The suites' two convergence problems, run with a cosine-decayed step (UseCosineSchedule):
// least squares, 400 rows of d = 50 (optimum known exactly) ...
inline SimResult ExpectConvergesOnLeastSquares(const SchemeFactory& factory, SimOptions opts, double tolerance) {
  const LeastSquares problem(400, 50, 9);
  UseCosineSchedule(opts);
  return ExpectConverges(factory, problem, opts, problem.optimum(), tolerance);
}

// ... and L2-regularized logistic regression, 400 rows of d = 30 (optimum by long gradient descent).
inline SimResult ExpectConvergesOnLogistic(const SchemeFactory& factory, SimOptions opts, double tolerance) {
  const Logistic problem(400, 30, 0.05, 4);
  UseCosineSchedule(opts);
  return ExpectConverges(factory, problem, opts, problem.ReferenceOptimum(), tolerance);
}

// Simulates `scheme` with `opts` and `reference` with `reference_opts` on `problem`: both runs
// succeed, the scheme's replicas stay identical, and its weights equal the reference's, bitwise when
// `tolerance` is 0, else within relative error `tolerance`.
inline void ExpectMatches(const Problem& problem, const SchemeFactory& scheme, const SimOptions& opts,
                          const SchemeFactory& reference, const SimOptions& reference_opts, double tolerance) {
  const auto s = Simulate(scheme, problem, opts);
  const auto ref = Simulate(reference, problem, reference_opts);
  REQUIRE(s.status.ok());
  REQUIRE(ref.status.ok());
  CHECK(s.replicas_identical);
  if (tolerance == 0.0) {
    CHECK(s.replicas[0] == ref.replicas[0]);
  } else {
    CHECK(RelativeError(s.replicas[0], ref.replicas[0]) < tolerance);
  }
}

inline void ExpectMatches(const Problem& problem, const SchemeFactory& scheme, const SchemeFactory& reference,
                          const SimOptions& opts, double tolerance) {
  ExpectMatches(problem, scheme, opts, reference, opts, tolerance);
}

// One poisoned gradient entry: g[index] = value on `worker` in `round`.
struct BadEntry {
  std::uint32_t worker;
  std::uint64_t round;
  std::size_t index;
  float value;
};

// A SimOptions::tamper hook that writes `entries` into the gradients.
inline auto PoisonGradients(std::vector<BadEntry> entries) {
  return [entries = std::move(entries)](std::uint32_t worker, std::uint64_t round, std::vector<float>& g) {
    for (const auto& e : entries) {
      if (e.worker == worker && e.round == round) g[e.index] = e.value;
    }
  };
}

// The NaN guard: with `opts.tamper` poisoning `skipped` worker-rounds, the run succeeds, exactly those
// worker-rounds are skipped, and the replicas stay identical and finite. Returns the run.
inline SimResult ExpectSkipsNonFinite(const SchemeFactory& factory, const Problem& problem, const SimOptions& opts,
                                      std::uint64_t skipped = 2) {
  auto r = Simulate(factory, problem, opts);
  INFO(r.status.ToString());
  REQUIRE(r.status.ok());
  CHECK(r.skipped_rounds == skipped);
  CHECK(r.replicas_identical);
  for (float v : r.replicas[0]) REQUIRE(std::isfinite(v));
  return r;
}

}  // namespace sketchps::testing
