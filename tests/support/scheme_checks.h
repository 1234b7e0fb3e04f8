// Checks every scheme test suite repeats, written once (a small conformance helper).
#pragma once

#include <catch2/catch.hpp>

#include "support/simulation.h"

namespace sketchps::testing {

// A cosine-decayed step over the whole run: with error feedback and P > 1 the workers' local
// gradients differ at the optimum, so only a decaying step converges to it.
inline void UseCosineSchedule(SimOptions& o) {
  o.optimizer.lr.kind = LrSchedule::Kind::kCosine;
  o.optimizer.lr.total_epochs = static_cast<double>(o.rounds) / o.rounds_per_epoch;
}

// Simulates `factory` on `problem`; the run must succeed, keep every replica (and the master copy)
// identical, and end within relative error `tolerance` of `optimum`.
inline void ExpectConverges(const SchemeFactory& factory, const Problem& problem, const SimOptions& opts,
                            const std::vector<float>& optimum, double tolerance, std::uint32_t workers) {
  auto r = Simulate(factory, problem, opts);
  REQUIRE(r.status.ok());
  CHECK(r.replicas_identical);
  const double err = RelativeError(r.replicas[0], optimum);
  INFO("P = " << workers << ", relative error " << err);
  CHECK(err < tolerance);
}

}  // namespace sketchps::testing
