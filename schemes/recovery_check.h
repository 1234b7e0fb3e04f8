// RecoveryCheck: how a round's aggregate G_t compares with the exact sum s of every worker's
// compression input (scheme.diagnostics; engine/scheme.h RoundDiagnostics, docs/methods.md
// "Recovery diagnostics"). Host-side arithmetic on what the diagnostic phase returned; it never
// touches the scheme's state.
//
//   exact_sq    = ||s||^2
//   returned_sq = sum of s_i^2 over G_t's indices (every index when G_t is dense)
//   best_sq     = sum of s_i^2 over T, the k entries of largest |s_i| (ties: lower index first)
//   hits        = |indices of G_t  ∩  T|,   candidate_hits = |candidates ∩ T|
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/phase.h"
#include "engine/scheme.h"

namespace sketchps {

// Fills the exact fields of `out` (exact = true). `exact` must be DenseValues of dim values;
// `candidates` may be nullptr (no first-phase index set). InvalidArgument names what does not fit.
absl::Status CompareWithExact(const PayloadValue& exact, const Aggregate& g, std::uint64_t dim, std::uint64_t k,
                              const std::vector<std::uint32_t>* candidates, RoundDiagnostics& out);

}  // namespace sketchps
