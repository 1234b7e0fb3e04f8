#include "schemes/recovery_check.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace sketchps {
namespace {

// Marks T, the k entries of largest |s| (ties: lower index first), and returns their squared mass.
double MarkTopK(const std::vector<float>& s, std::uint64_t k, std::vector<char>& in_top) {
  std::vector<std::uint32_t> order(s.size());
  std::iota(order.begin(), order.end(), 0u);
  const auto larger = [&](std::uint32_t a, std::uint32_t b) {
    const float x = std::fabs(s[a]), y = std::fabs(s[b]);
    return x > y || (x == y && a < b);
  };
  k = std::min<std::uint64_t>(k, s.size());
  std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), larger);
  in_top.assign(s.size(), 0);
  double mass = 0;
  for (std::uint64_t i = 0; i < k; ++i) {
    in_top[order[i]] = 1;
    mass += static_cast<double>(s[order[i]]) * s[order[i]];
  }
  return mass;
}

absl::StatusOr<std::uint64_t> CountHits(const std::vector<std::uint32_t>& idx, const std::vector<char>& in_top,
                                        const char* what) {
  std::uint64_t hits = 0;
  for (const std::uint32_t i : idx) {
    if (i >= in_top.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("diagnostics: ", what, " index ", i, " outside a range of ", in_top.size()));
    }
    hits += in_top[i];
  }
  return hits;
}

}  // namespace

absl::Status CompareWithExact(const PayloadValue& exact, const Aggregate& g, std::uint64_t dim, std::uint64_t k,
                              const std::vector<std::uint32_t>* candidates, RoundDiagnostics& out) {
  const auto* s = std::get_if<DenseValues>(&exact);
  if (s == nullptr || s->values.size() != dim) {
    return absl::InvalidArgumentError(absl::StrCat("diagnostics: the exact phase returned ", PayloadKindName(exact),
                                                   " where ", dim, " dense values were expected"));
  }
  const std::vector<float>& v = s->values;
  std::vector<char> in_top;
  out.exact = true;
  out.k = std::min<std::uint64_t>(k, dim);
  out.best_sq = MarkTopK(v, out.k, in_top);
  out.exact_sq = 0;
  for (const float x : v) out.exact_sq += static_cast<double>(x) * x;
  if (const auto* sparse = std::get_if<SparseVector>(&g)) {
    out.returned_sq = 0;
    auto hits = CountHits(sparse->idx, in_top, "G_t");
    if (!hits.ok()) return hits.status();
    out.hits = *hits;
    for (const std::uint32_t i : sparse->idx) out.returned_sq += static_cast<double>(v[i]) * v[i];
  } else {
    out.returned_sq = out.exact_sq;
    out.hits = out.k;
  }
  out.has_candidates = candidates != nullptr;
  if (candidates != nullptr) {
    auto hits = CountHits(*candidates, in_top, "candidate");
    if (!hits.ok()) return hits.status();
    out.candidate_hits = *hits;
  }
  return absl::OkStatus();
}

}  // namespace sketchps
