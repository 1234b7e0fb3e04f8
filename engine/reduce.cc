#include "engine/reduce.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/count_sketch_hash.h"
#include "common/status.h"
#include "kernels/count_sketch.h"
#include "kernels/select.h"
#include "kernels/sparse.h"
#include "kernels/vector_ops.h"

namespace sketchps {
namespace {

absl::Status Mismatch(std::size_t worker, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("worker ", worker, ": ", what));
}

template <class T>
absl::StatusOr<const T*> PayloadAs(const Contribution& c, std::size_t worker, Reduction r) {
  const T* p = std::get_if<T>(&*c.payload);
  if (p == nullptr) {
    return Mismatch(worker, absl::StrCat(PayloadKindName(*c.payload), " payload in a ", ReductionName(r), " phase"));
  }
  return p;
}

absl::Status CheckIndices(const std::vector<std::uint32_t>& idx, std::uint64_t dim, std::size_t worker,
                          const char* field) {
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] >= dim) return Mismatch(worker, absl::StrCat(field, "[", i, "] = ", idx[i], " >= dim ", dim));
    if (i > 0 && idx[i] <= idx[i - 1]) return Mismatch(worker, absl::StrCat(field, " not strictly increasing at ", i));
  }
  return absl::OkStatus();
}

}  // namespace

Reducer::Reducer(std::uint64_t dim) : dim_(dim), exec_{nullptr, &scratch_} {}

void Reducer::Reserve(std::size_t n) {
  if (acc_.size() < n) acc_ = kernels::DeviceArray<float>(n);
  if (idx_.size() < n) {
    idx_ = kernels::DeviceArray<std::uint32_t>(n);
    val_ = kernels::DeviceArray<float>(n);
  }
}

absl::StatusOr<PhaseResult> Reducer::Reduce(const PhaseSpec& spec, const std::vector<const Contribution*>& in,
                                            const PhaseResult* previous) {
  PhaseResult result;
  for (const auto* c : in) result.contributors += c->payload.has_value() ? 1 : 0;
  SKETCHPS_ASSIGN_OR_RETURN(result.value, Dispatch(spec, in, previous));
  return result;
}

absl::StatusOr<PayloadValue> Reducer::Dispatch(const PhaseSpec& spec, const std::vector<const Contribution*>& in,
                                               const PhaseResult* previous) {
  switch (spec.reduction) {
    case Reduction::kDenseSum: {
      if (spec.at_previous_indices) return IndexedSum(in, previous, spec.keep);
      SKETCHPS_ASSIGN_OR_RETURN(auto sum, DenseSum(in));
      return PayloadValue{DenseValues{std::move(sum)}};
    }
    case Reduction::kSparseSum: return SparseSum(in, spec.keep);
    case Reduction::kSketchRecover: return SketchRecover(in, spec.keep);
    case Reduction::kLeaderIndexSet: return LeaderSet(in, spec.leader);
  }
  return absl::InvalidArgumentError("unknown reduction");
}

absl::StatusOr<std::vector<float>> Reducer::DenseSum(const std::vector<const Contribution*>& in) {
  std::optional<std::size_t> length;
  std::vector<float> sum;
  for (std::size_t w = 0; w < in.size(); ++w) {
    if (!in[w]->payload) continue;
    SKETCHPS_ASSIGN_OR_RETURN(const auto* p, PayloadAs<DenseValues>(*in[w], w, Reduction::kDenseSum));
    if (p->values.size() > dim_) return Mismatch(w, absl::StrCat("dense.count ", p->values.size(), " > dim ", dim_));
    if (length && *length != p->values.size()) {
      return Mismatch(w, absl::StrCat("dense.count ", p->values.size(), " != ", *length, " of the other workers"));
    }
    if (!length) sum.assign(*(length = p->values.size()), 0.0f);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += p->values[i];
  }
  return sum;
}

absl::StatusOr<PayloadValue> Reducer::IndexedSum(const std::vector<const Contribution*>& in, const PhaseResult* previous,
                                                 std::uint64_t keep) {
  const std::vector<std::uint32_t>* indices = previous ? ResultIndices(*previous) : nullptr;
  if (indices == nullptr) return absl::InvalidArgumentError("values at previous indices, but the previous phase has no index set");
  SKETCHPS_ASSIGN_OR_RETURN(std::vector<float> sum, DenseSum(in));
  if (sum.empty()) sum.assign(indices->size(), 0.0f);  // every worker skipped
  if (sum.size() != indices->size()) {
    return absl::InvalidArgumentError(absl::StrCat("dense.count ", sum.size(), " != ", indices->size(), " previous indices"));
  }
  std::vector<std::size_t> order(sum.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (keep > 0 && keep < order.size()) {
    // The `keep` largest sums by magnitude, ties by index (indices are increasing, so by position).
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return std::fabs(sum[a]) > std::fabs(sum[b]); });
    order.resize(keep);
    std::sort(order.begin(), order.end());
  }
  SparseVector out{dim_, {}, {}};
  for (std::size_t i : order) {
    out.idx.push_back((*indices)[i]);
    out.val.push_back(sum[i]);
  }
  return PayloadValue{std::move(out)};
}

absl::StatusOr<PayloadValue> Reducer::SparseSum(const std::vector<const Contribution*>& in, std::uint64_t keep) {
  Reserve(dim_);
  acc_.Zero();
  for (std::size_t w = 0; w < in.size(); ++w) {
    if (!in[w]->payload) continue;
    SKETCHPS_ASSIGN_OR_RETURN(const auto* p, PayloadAs<SparseVector>(*in[w], w, Reduction::kSparseSum));
    if (p->dim != dim_) return Mismatch(w, absl::StrCat("sparse.dim ", p->dim, " != ", dim_));
    if (p->idx.size() != p->val.size()) return Mismatch(w, "sparse.indices and sparse.values differ in count");
    SKETCHPS_RETURN_IF_ERROR(CheckIndices(p->idx, dim_, w, "sparse.indices"));
    idx_.FromHost(p->idx);
    val_.FromHost(p->val);
    SKETCHPS_RETURN_IF_ERROR(kernels::ScatterAdd(idx_.data(), val_.data(), p->idx.size(), acc_.data(), dim_, exec_));
  }
  std::size_t count = 0;
  if (keep > 0) {
    SKETCHPS_ASSIGN_OR_RETURN(count, kernels::TopK(acc_.data(), dim_, keep, idx_.data(), val_.data(), exec_));
    SKETCHPS_RETURN_IF_ERROR(kernels::SortByIndex(idx_.data(), val_.data(), count, exec_));
  } else {
    SKETCHPS_ASSIGN_OR_RETURN(count, kernels::ThresholdSelect(acc_.data(), dim_, 0.0f, dim_, idx_.data(), val_.data(), exec_));
  }
  SKETCHPS_ASSIGN_OR_RETURN(auto out, Collect(count, /*drop_zeros=*/true));
  return PayloadValue{std::move(out)};
}

absl::StatusOr<PayloadValue> Reducer::SketchRecover(const std::vector<const Contribution*>& in, std::uint64_t keep) {
  if (keep == 0) return absl::InvalidArgumentError("sketch_recover phase with keep = 0");
  const SketchTable* first = nullptr;
  for (std::size_t w = 0; w < in.size(); ++w) {
    if (!in[w]->payload) continue;
    SKETCHPS_ASSIGN_OR_RETURN(const auto* p, PayloadAs<SketchTable>(*in[w], w, Reduction::kSketchRecover));
    if (p->dim != dim_) return Mismatch(w, absl::StrCat("sketch.dim ", p->dim, " != ", dim_));
    if (p->table.size() != std::uint64_t{p->rows} * p->cols) return Mismatch(w, "sketch.table size != rows * cols");
    if (first == nullptr) {
      first = p;
      Reserve(std::max<std::uint64_t>(p->table.size(), dim_));
      acc_.Zero();
    } else if (p->rows != first->rows || p->cols != first->cols || p->seed != first->seed) {
      return Mismatch(w, "sketch.rows/cols/seed differ from the other workers'");
    }
    val_.FromHost(p->table);
    SKETCHPS_RETURN_IF_ERROR(kernels::SketchMerge(acc_.data(), val_.data(), p->table.size(), exec_));
  }
  if (first == nullptr) return PayloadValue{SparseVector{dim_, {}, {}}};
  SKETCHPS_ASSIGN_OR_RETURN(auto hash, CountSketchHash::Create({first->rows, first->cols, first->seed, dim_}));
  SKETCHPS_ASSIGN_OR_RETURN(std::size_t count,
                            kernels::SketchRecover(acc_.data(), hash, dim_, keep, idx_.data(), val_.data(), exec_));
  SKETCHPS_RETURN_IF_ERROR(kernels::SortByIndex(idx_.data(), val_.data(), count, exec_));
  SKETCHPS_ASSIGN_OR_RETURN(auto out, Collect(count, /*drop_zeros=*/false));
  return PayloadValue{std::move(out)};
}

absl::StatusOr<PayloadValue> Reducer::LeaderSet(const std::vector<const Contribution*>& in, std::uint32_t leader) {
  if (leader >= in.size()) return absl::InvalidArgumentError(absl::StrCat("leader ", leader, " is not a worker"));
  for (std::size_t w = 0; w < in.size(); ++w) {
    if (!in[w]->payload) continue;
    SKETCHPS_ASSIGN_OR_RETURN(const auto* p, PayloadAs<IndexSet>(*in[w], w, Reduction::kLeaderIndexSet));
    if (p->dim != dim_) return Mismatch(w, absl::StrCat("index_set.dim ", p->dim, " != ", dim_));
    if (w == leader) SKETCHPS_RETURN_IF_ERROR(CheckIndices(p->idx, dim_, w, "index_set.indices"));
  }
  if (!in[leader]->payload) return PayloadValue{IndexSet{dim_, {}}};
  return PayloadValue{std::get<IndexSet>(*in[leader]->payload)};
}

absl::StatusOr<SparseVector> Reducer::Collect(std::size_t count, bool drop_zeros) {
  SparseVector out{dim_, idx_.ToHost(count), val_.ToHost(count)};
  if (!drop_zeros) return out;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (out.val[i] == 0.0f) continue;
    out.idx[kept] = out.idx[i];
    out.val[kept++] = out.val[i];
  }
  out.idx.resize(kept);
  out.val.resize(kept);
  return out;
}

}  // namespace sketchps
