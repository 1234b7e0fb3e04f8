#include "peer/partial.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sketchps::peer {
namespace {

// x + 0.0f turns -0 into +0, as the PS's accumulation from a zeroed buffer does, so that a
// two-rank sum is bitwise the PS's (0 + w0) + w1.
void AddZero(std::vector<float>& v) {
  for (auto& x : v) x += 0.0f;
}

void AddInto(std::vector<float>& low, const std::vector<float>& high) {
  for (std::size_t i = 0; i < low.size(); ++i) low[i] += high[i];
}

absl::Status AddPayload(PayloadValue& low, const PayloadValue& high) {
  if (auto* a = std::get_if<DenseValues>(&low)) {
    const auto* b = std::get_if<DenseValues>(&high);
    if (b == nullptr) return absl::InvalidArgumentError(absl::StrCat(PayloadKindName(high), " payload in a dense sum"));
    if (a->values.size() != b->values.size()) {
      return absl::InvalidArgumentError(absl::StrCat("dense.count ", b->values.size(), " != ", a->values.size()));
    }
    AddInto(a->values, b->values);
    return absl::OkStatus();
  }
  auto* a = std::get_if<SketchTable>(&low);
  const auto* b = std::get_if<SketchTable>(&high);
  if (a == nullptr || b == nullptr) return absl::InvalidArgumentError("sketch sum of a non-sketch payload");
  if (a->rows != b->rows || a->cols != b->cols || a->seed != b->seed || a->dim != b->dim) {
    return absl::InvalidArgumentError(absl::StrCat("sketch.rows/cols/seed/dim ", b->rows, "/", b->cols, "/", b->seed,
                                                   "/", b->dim, " != ", a->rows, "/", a->cols, "/", a->seed, "/",
                                                   a->dim));
  }
  AddInto(a->table, b->table);
  return absl::OkStatus();
}

absl::StatusOr<Partial> CombineSum(Partial low, Partial high) {
  Partial out;
  out.contributors = low.contributors + high.contributors;
  Item& a = low.items.front();
  Item& b = high.items.front();
  out.items.push_back(Item{std::min(a.origin, b.origin), std::nullopt});
  if (!a.payload) {
    out.items.front().payload = std::move(b.payload);
  } else {
    if (b.payload) SKETCHPS_RETURN_IF_ERROR(AddPayload(*a.payload, *b.payload));
    out.items.front().payload = std::move(a.payload);
  }
  return out;
}

absl::StatusOr<Partial> CombineGather(Partial low, Partial high) {
  Partial out;
  out.contributors = low.contributors + high.contributors;
  // Both lists are in rank order; merge them (the fold interleaves ranks: {0, 4} and {1, 5}).
  std::size_t i = 0, j = 0;
  while (i < low.items.size() || j < high.items.size()) {
    const bool take_low =
        j == high.items.size() || (i < low.items.size() && low.items[i].origin < high.items[j].origin);
    out.items.push_back(std::move(take_low ? low.items[i++] : high.items[j++]));
  }
  return out;
}

absl::StatusOr<Partial> CombineTree(const PhaseSpec& spec, Partial low, Partial high, Reducer& reducer) {
  const std::uint32_t contributors = low.contributors + high.contributors;
  const std::uint32_t origin = std::min(low.items.front().origin, high.items.front().origin);
  const Contribution a{spec, std::move(low.items.front().payload)};
  const Contribution b{spec, std::move(high.items.front().payload)};
  if (!a.payload && !b.payload) return Partial{contributors, {Item{origin, std::nullopt}}};
  auto merged = reducer.Reduce(spec, {&a, &b}, nullptr);
  if (!merged.ok()) return merged.status();
  return Partial{contributors, {Item{origin, std::optional<PayloadValue>(std::move(merged->value))}}};
}

absl::StatusOr<Partial> CombineLeader(Partial low, Partial high) {
  Partial out;
  out.contributors = low.contributors + high.contributors;
  out.items = low.items.empty() ? std::move(high.items) : std::move(low.items);
  return out;
}

bool KindMatches(Reduction r, const PayloadValue& p) {
  switch (r) {
    case Reduction::kDenseSum: return std::holds_alternative<DenseValues>(p);
    case Reduction::kSparseSum: return std::holds_alternative<SparseVector>(p);
    case Reduction::kSketchRecover:
    case Reduction::kSketchMomentumError: return std::holds_alternative<SketchTable>(p);
    case Reduction::kLeaderIndexSet: return std::holds_alternative<IndexSet>(p);
  }
  return false;
}

}  // namespace

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kSum: return "all-reduce";
    case Collective::kGather: return "all-gather";
    case Collective::kTreeTopK: return "top-k-tree";
    case Collective::kLeader: return "broadcast";
  }
  return "unknown";
}

Collective CollectiveFor(const PhaseSpec& spec, bool sparse_tree_merge) {
  switch (spec.reduction) {
    case Reduction::kDenseSum:
    case Reduction::kSketchRecover:
    case Reduction::kSketchMomentumError: return Collective::kSum;
    case Reduction::kSparseSum: return sparse_tree_merge && spec.keep > 0 ? Collective::kTreeTopK : Collective::kGather;
    case Reduction::kLeaderIndexSet: return Collective::kLeader;
  }
  return Collective::kGather;
}

const char* ExpectedKind(Reduction r) {
  switch (r) {
    case Reduction::kDenseSum: return "dense";
    case Reduction::kSparseSum: return "sparse";
    case Reduction::kSketchRecover:
    case Reduction::kSketchMomentumError: return "sketch";
    case Reduction::kLeaderIndexSet: return "index_set";
  }
  return "unknown";
}

absl::StatusOr<Partial> LeafPartial(Collective c, const Contribution& own, std::uint32_t rank) {
  if (own.payload && !KindMatches(own.spec.reduction, *own.payload)) {
    return absl::InvalidArgumentError(absl::StrCat("own payload: ", PayloadKindName(*own.payload), " in a ",
                                                   ReductionName(own.spec.reduction), " phase (expects ",
                                                   ExpectedKind(own.spec.reduction), ")"));
  }
  Partial leaf;
  leaf.contributors = own.payload ? 1 : 0;
  if (c == Collective::kLeader) {
    if (rank == own.spec.leader) leaf.items.push_back(Item{rank, own.payload});
    return leaf;
  }
  leaf.items.push_back(Item{rank, own.payload});
  if (c == Collective::kSum && own.payload) {
    auto& p = *leaf.items.front().payload;
    if (auto* d = std::get_if<DenseValues>(&p)) AddZero(d->values);
    if (auto* s = std::get_if<SketchTable>(&p)) AddZero(s->table);
  }
  return leaf;
}

absl::StatusOr<Partial> Combine(Collective c, const PhaseSpec& spec, Partial low, Partial high, Reducer& reducer) {
  switch (c) {
    case Collective::kSum: return CombineSum(std::move(low), std::move(high));
    case Collective::kGather: return CombineGather(std::move(low), std::move(high));
    case Collective::kTreeTopK: return CombineTree(spec, std::move(low), std::move(high), reducer);
    case Collective::kLeader: return CombineLeader(std::move(low), std::move(high));
  }
  return absl::InternalError("unknown collective");
}

absl::StatusOr<PhaseResult> FinishPartial(Collective c, const PhaseSpec& spec, Partial state, const Contribution& own,
                                          std::uint32_t rank, std::uint32_t num_ranks, const PhaseResult* previous,
                                          Reducer& reducer) {
  std::vector<Contribution> in;
  if (c == Collective::kGather) {
    if (state.items.size() != num_ranks) {
      return absl::InternalError(
          absl::StrCat("all-gather ended with ", state.items.size(), " of ", num_ranks, " payloads"));
    }
    for (auto& item : state.items) in.push_back(Contribution{spec, std::move(item.payload)});
  } else if (c == Collective::kLeader) {
    in.assign(num_ranks, Contribution{spec, std::nullopt});
    in[rank] = own;
    if (!state.items.empty()) in[spec.leader].payload = std::move(state.items.front().payload);
  } else {
    in.push_back(Contribution{spec, std::move(state.items.front().payload)});
  }
  std::vector<const Contribution*> ptrs;
  for (const auto& x : in) ptrs.push_back(&x);
  // The reducer learns how many workers the (pre-summed) payloads stand for: the stateful sketch
  // reduction averages by it (engine/reduce.h).
  absl::StatusOr<PhaseResult> result = reducer.Reduce(spec, ptrs, previous, state.contributors);
  if (result.ok()) result->contributors = state.contributors;
  return result;
}

}  // namespace sketchps::peer
