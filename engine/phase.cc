#include "engine/phase.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/overloaded.h"

namespace sketchps {

const char* ReductionName(Reduction r) {
  switch (r) {
    case Reduction::kDenseSum: return "dense_sum";
    case Reduction::kSparseSum: return "sparse_sum";
    case Reduction::kSketchRecover: return "sketch_recover";
    case Reduction::kLeaderIndexSet: return "leader_index_set";
    case Reduction::kSketchMomentumError: return "sketch_momentum_error";
  }
  return "unknown";
}

const char* PayloadKindName(const PayloadValue& payload) {
  return std::visit(
      Overloaded{[](const DenseValues&) { return "dense"; }, [](const SparseVector&) { return "sparse"; },
                 [](const SketchTable&) { return "sketch"; }, [](const IndexSet&) { return "index_set"; }},
      payload);
}

std::uint64_t RawPayloadBytes(const PayloadValue& payload, ValueEncoding values) {
  const std::uint64_t value_bytes = values == ValueEncoding::kF32 ? 4 : 2;
  return std::visit(Overloaded{[&](const DenseValues& p) -> std::uint64_t { return p.values.size() * value_bytes; },
                               [&](const SparseVector& p) -> std::uint64_t { return p.idx.size() * (4 + value_bytes); },
                               [](const SketchTable& p) -> std::uint64_t { return p.table.size() * 4; },
                               [](const IndexSet& p) -> std::uint64_t { return p.idx.size() * 4; }},
                    payload);
}

bool IsExcluded(const PhaseResult& result, std::uint32_t worker) {
  return std::binary_search(result.excluded.begin(), result.excluded.end(), worker);
}

PhaseResult RefusedResult(Reduction reduction, std::uint64_t dim) {
  PhaseResult r;
  if (reduction == Reduction::kLeaderIndexSet) {
    r.value = IndexSet{dim, {}};
  } else {
    r.value = SparseVector{dim, {}, {}};
  }
  r.refused = true;
  return r;
}

bool AllFinite(const PayloadValue& payload) {
  auto finite = [](const std::vector<float>& v) {
    for (float x : v) {
      if (!std::isfinite(x)) return false;
    }
    return true;
  };
  return std::visit(
      Overloaded{[&](const DenseValues& p) { return finite(p.values); },
                 [&](const SparseVector& p) { return finite(p.val); },
                 [&](const SketchTable& p) { return finite(p.table); }, [](const IndexSet&) { return true; }},
      payload);
}

namespace {

void DivideBy(std::vector<float>& values, std::uint32_t contributors) {
  if (contributors <= 1) return;
  const auto p = static_cast<float>(contributors);
  for (auto& v : values) v /= p;
}

}  // namespace

absl::StatusOr<Aggregate> MeanAggregate(const PhaseResult& result, std::uint64_t dim) {
  if (const auto* dense = std::get_if<DenseValues>(&result.value)) {
    if (dense->values.size() != dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("final dense result has ", dense->values.size(), " values, range has ", dim));
    }
    DenseValues g = *dense;
    DivideBy(g.values, result.contributors);
    return g;
  }
  if (const auto* sparse = std::get_if<SparseVector>(&result.value)) {
    if (sparse->dim != dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("final sparse result over ", sparse->dim, " entries, range has ", dim));
    }
    SparseVector g = *sparse;
    DivideBy(g.val, result.contributors);
    return g;
  }
  return absl::InvalidArgumentError(absl::StrCat("a ", PayloadKindName(result.value), " result cannot end a round"));
}

const std::vector<std::uint32_t>* ResultIndices(const PhaseResult& result) {
  if (const auto* s = std::get_if<SparseVector>(&result.value)) return &s->idx;
  if (const auto* i = std::get_if<IndexSet>(&result.value)) return &i->idx;
  return nullptr;
}

}  // namespace sketchps
