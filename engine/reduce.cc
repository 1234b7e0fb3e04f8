#include "engine/reduce.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/count_sketch_hash.h"
#include "common/status.h"
#include "kernels/count_sketch.h"
#include "kernels/select.h"
#include "kernels/sparse.h"
#include "kernels/vector_ops.h"

namespace sketchps {
namespace {

absl::Status Invalid(const std::string& what) { return absl::InvalidArgumentError(what); }

template <class T>
absl::StatusOr<const T*> PayloadAs(const PayloadValue& payload, Reduction r) {
  const T* p = std::get_if<T>(&payload);
  if (p == nullptr)
    return Invalid(absl::StrCat("payload: a ", PayloadKindName(payload), " payload in a ", ReductionName(r), " phase"));
  return p;
}

absl::Status CheckIndices(const std::vector<std::uint32_t>& idx, std::uint64_t dim, const char* field) {
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] >= dim) return Invalid(absl::StrCat(field, "[", i, "] = ", idx[i], " >= dim ", dim));
    if (i > 0 && idx[i] <= idx[i - 1]) return Invalid(absl::StrCat(field, ": not strictly increasing at position ", i));
  }
  return absl::OkStatus();
}

absl::Status CheckFinite(const std::vector<float>& values, const char* field) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return Invalid(absl::StrCat(field, "[", i, "] is not finite"));
  }
  return absl::OkStatus();
}

absl::Status CheckDim(std::uint64_t got, std::uint64_t dim, const char* field) {
  if (got != dim) return Invalid(absl::StrCat(field, ": ", got, " != the range length ", dim));
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

absl::Status Reducer::AdmitDense(const PhaseSpec& spec, const DenseValues& p, const PhaseResult* previous,
                                 const PayloadValue* first) const {
  SKETCHPS_RETURN_IF_ERROR(CheckFinite(p.values, "dense.values"));
  const std::size_t n = p.values.size();
  if (spec.at_previous_indices) {
    const std::vector<std::uint32_t>* indices = previous ? ResultIndices(*previous) : nullptr;
    if (indices == nullptr) return Invalid("spec.at_previous_indices: the previous phase has no index set");
    if (n != indices->size())
      return Invalid(absl::StrCat("dense.count: ", n, " != the ", indices->size(), " previous indices"));
    return absl::OkStatus();
  }
  if (spec.final_phase) return CheckDim(n, dim_, "dense.count");
  if (n > dim_) return Invalid(absl::StrCat("dense.count: ", n, " > the range length ", dim_));
  const auto* other = first ? std::get_if<DenseValues>(first) : nullptr;
  if (other && other->values.size() != n) {
    return Invalid(absl::StrCat("dense.count: ", n, " != ", other->values.size(), " of the other workers"));
  }
  return absl::OkStatus();
}

absl::Status Reducer::AdmitSketch(const PhaseSpec& spec, const SketchTable& p, const PayloadValue* first) const {
  if (spec.keep == 0) return Invalid("spec.keep: a sketch_recover phase needs keep > 0");
  SKETCHPS_RETURN_IF_ERROR(CheckDim(p.dim, dim_, "sketch.dim"));
  if (p.rows == 0 || p.cols == 0) return Invalid("sketch.rows/cols: must be > 0");
  if (p.table.size() != std::uint64_t{p.rows} * p.cols) return Invalid("sketch.table: size != rows * cols");
  SKETCHPS_RETURN_IF_ERROR(CheckFinite(p.table, "sketch.table"));
  const auto* other = first ? std::get_if<SketchTable>(first) : nullptr;
  if (other && (other->rows != p.rows || other->cols != p.cols || other->seed != p.seed)) {
    return Invalid(absl::StrCat("sketch.rows/cols/seed: ", p.rows, " x ", p.cols, " seed ", p.seed,
                                " differ from the other workers' ", other->rows, " x ", other->cols, " seed ",
                                other->seed));
  }
  return absl::OkStatus();
}

absl::Status Reducer::Admit(const PhaseSpec& spec, const PayloadValue& payload, const PhaseResult* previous,
                            const PayloadValue* first) const {
  switch (spec.reduction) {
    case Reduction::kDenseSum: {
      SKETCHPS_ASSIGN_OR_RETURN(const auto* p, PayloadAs<DenseValues>(payload, spec.reduction));
      return AdmitDense(spec, *p, previous, first);
    }
    case Reduction::kSparseSum: {
      SKETCHPS_ASSIGN_OR_RETURN(const auto* p, PayloadAs<SparseVector>(payload, spec.reduction));
      SKETCHPS_RETURN_IF_ERROR(CheckDim(p->dim, dim_, "sparse.dim"));
      if (p->idx.size() != p->val.size()) return Invalid("sparse.indices/values: counts differ");
      SKETCHPS_RETURN_IF_ERROR(CheckIndices(p->idx, dim_, "sparse.indices"));
      return CheckFinite(p->val, "sparse.values");
    }
    case Reduction::kSketchRecover: {
      SKETCHPS_ASSIGN_OR_RETURN(const auto* p, PayloadAs<SketchTable>(payload, spec.reduction));
      return AdmitSketch(spec, *p, first);
    }
    case Reduction::kLeaderIndexSet: {
      SKETCHPS_ASSIGN_OR_RETURN(const auto* p, PayloadAs<IndexSet>(payload, spec.reduction));
      SKETCHPS_RETURN_IF_ERROR(CheckDim(p->dim, dim_, "index_set.dim"));
      return CheckIndices(p->idx, dim_, "index_set.indices");
    }
    case Reduction::kSketchMomentumError: {
      if (!spec.final_phase) return Invalid("spec.final_phase: a sketch_momentum_error phase ends its round");
      if (!(spec.momentum >= 0.0 && spec.momentum < 1.0)) {
        return Invalid(absl::StrCat("spec.momentum: ", spec.momentum, " is not in [0, 1)"));
      }
      SKETCHPS_ASSIGN_OR_RETURN(const auto* p, PayloadAs<SketchTable>(payload, spec.reduction));
      return AdmitSketch(spec, *p, first);
    }
  }
  return Invalid("spec.reduction: unknown");
}

absl::StatusOr<PhaseResult> Reducer::Reduce(const PhaseSpec& spec, const std::vector<const Contribution*>& in,
                                            const PhaseResult* previous, std::optional<std::uint32_t> contributors) {
  PhaseResult result;
  const PayloadValue* first = nullptr;
  for (std::size_t w = 0; w < in.size(); ++w) {
    if (!in[w]->payload) continue;
    if (auto st = Admit(spec, *in[w]->payload, previous, first); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("worker ", w, ": ", st.message()));
    }
    if (first == nullptr) first = &*in[w]->payload;
    ++result.contributors;
  }
  if (contributors) result.contributors = first == nullptr ? 0 : *contributors;
  if (first == nullptr && spec.reduction == Reduction::kDenseSum && !spec.at_previous_indices) {
    result.value = SparseVector{dim_, {}, {}};  // every worker skipped: no gradient this round
    return result;
  }
  if (spec.reduction == Reduction::kSketchMomentumError) {
    bool refused = false;
    SKETCHPS_ASSIGN_OR_RETURN(result.value, SketchMomentumError(in, spec, result.contributors, refused));
    if (refused || !AllFinite(result.value)) return RefusedResult(spec.reduction, dim_);
    return result;
  }
  SKETCHPS_ASSIGN_OR_RETURN(result.value, Dispatch(spec, in, previous));
  if (!AllFinite(result.value)) return RefusedResult(spec.reduction, dim_);
  return result;
}

absl::StatusOr<PayloadValue> Reducer::Dispatch(const PhaseSpec& spec, const std::vector<const Contribution*>& in,
                                               const PhaseResult* previous) {
  switch (spec.reduction) {
    case Reduction::kDenseSum: {
      if (spec.at_previous_indices) return IndexedSum(in, previous, spec.keep);
      return PayloadValue{DenseValues{DenseSum(in)}};
    }
    case Reduction::kSparseSum: return SparseSum(in, spec.keep);
    case Reduction::kSketchRecover: {
      SKETCHPS_ASSIGN_OR_RETURN(PayloadValue found, SketchRecover(in, spec.keep));
      if (spec.final_phase) return found;
      // Candidates for a later phase: the workers need their indices only, not the estimates.
      auto& candidates = std::get<SparseVector>(found);
      return PayloadValue{IndexSet{candidates.dim, std::move(candidates.idx)}};
    }
    case Reduction::kLeaderIndexSet: return LeaderSet(in, spec.leader);
    case Reduction::kSketchMomentumError: break;  // stateful: Reduce calls it itself
  }
  return absl::InvalidArgumentError("unknown reduction");
}

// The payloads below were admitted (Admit): kinds, sizes and indices are known to be consistent.
std::vector<float> Reducer::DenseSum(const std::vector<const Contribution*>& in) {
  std::vector<float> sum;
  for (const auto* c : in) {
    if (!c->payload) continue;
    const auto& values = std::get<DenseValues>(*c->payload).values;
    if (sum.empty()) sum.assign(values.size(), 0.0f);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += values[i];
  }
  return sum;
}

absl::StatusOr<PayloadValue> Reducer::IndexedSum(const std::vector<const Contribution*>& in,
                                                 const PhaseResult* previous, std::uint64_t keep) {
  const std::vector<std::uint32_t>* indices = previous ? ResultIndices(*previous) : nullptr;
  if (indices == nullptr)
    return absl::InvalidArgumentError("values at previous indices, but the previous phase has no index set");
  std::vector<float> sum = DenseSum(in);
  if (sum.empty()) sum.assign(indices->size(), 0.0f);  // every worker skipped
  std::vector<std::size_t> order(sum.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (keep > 0 && keep < order.size()) {
    // The `keep` largest sums by magnitude, ties by index (indices are increasing, so by position).
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return std::fabs(sum[a]) > std::fabs(sum[b]); });
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
  for (const auto* c : in) {
    if (!c->payload) continue;
    const auto& p = std::get<SparseVector>(*c->payload);
    idx_.FromHost(p.idx);
    val_.FromHost(p.val);
    SKETCHPS_RETURN_IF_ERROR(kernels::ScatterAdd(idx_.data(), val_.data(), p.idx.size(), acc_.data(), dim_, exec_));
  }
  std::size_t count = 0;
  if (keep > 0) {
    SKETCHPS_ASSIGN_OR_RETURN(count, kernels::TopK(acc_.data(), dim_, keep, idx_.data(), val_.data(), exec_));
    SKETCHPS_RETURN_IF_ERROR(kernels::SortByIndex(idx_.data(), val_.data(), count, exec_));
  } else {
    SKETCHPS_ASSIGN_OR_RETURN(count,
                              kernels::ThresholdSelect(acc_.data(), dim_, 0.0f, dim_, idx_.data(), val_.data(), exec_));
  }
  SKETCHPS_ASSIGN_OR_RETURN(auto out, Collect(count, /*drop_zeros=*/true));
  return PayloadValue{std::move(out)};
}

absl::StatusOr<const SketchTable*> Reducer::SumTables(const std::vector<const Contribution*>& in) {
  const SketchTable* first = nullptr;
  for (const auto* c : in) {
    if (!c->payload) continue;
    const auto& p = std::get<SketchTable>(*c->payload);
    if (first == nullptr) {
      first = &p;
      Reserve(std::max<std::uint64_t>(p.table.size(), dim_));
      acc_.Zero();
    }
    val_.FromHost(p.table);
    SKETCHPS_RETURN_IF_ERROR(kernels::SketchMerge(acc_.data(), val_.data(), p.table.size(), exec_));
  }
  return first;
}

absl::StatusOr<PayloadValue> Reducer::SketchRecover(const std::vector<const Contribution*>& in, std::uint64_t keep) {
  SKETCHPS_ASSIGN_OR_RETURN(const SketchTable* first, SumTables(in));
  if (first == nullptr) return PayloadValue{SparseVector{dim_, {}, {}}};
  SKETCHPS_ASSIGN_OR_RETURN(auto hash, CountSketchHash::Create({first->rows, first->cols, first->seed, dim_}));
  SKETCHPS_ASSIGN_OR_RETURN(std::size_t count,
                            kernels::SketchRecover(acc_.data(), hash, dim_, keep, idx_.data(), val_.data(), exec_));
  SKETCHPS_RETURN_IF_ERROR(kernels::SortByIndex(idx_.data(), val_.data(), count, exec_));
  SKETCHPS_ASSIGN_OR_RETURN(auto out, Collect(count, /*drop_zeros=*/false));
  return PayloadValue{std::move(out)};
}

absl::StatusOr<PayloadValue> Reducer::SketchMomentumError(const std::vector<const Contribution*>& in,
                                                          const PhaseSpec& spec, std::uint32_t contributors,
                                                          bool& refused) {
  // S = the sum of the tables, in worker order (as SketchRecover).
  SKETCHPS_ASSIGN_OR_RETURN(const SketchTable* first, SumTables(in));
  if (first == nullptr || contributors == 0) return PayloadValue{SparseVector{dim_, {}, {}}};  // state untouched
  const std::size_t cells = first->table.size();
  if (momentum_.size() == 0) {  // the first round (or a cleared state): zeros of the tables' shape
    shape_ = ReductionState{first->rows, first->cols, first->seed, {}, {}};
    momentum_ = kernels::DeviceArray<float>(cells);
    error_ = kernels::DeviceArray<float>(cells);
    momentum_.Zero();
    error_.Zero();
  } else if (shape_.rows != first->rows || shape_.cols != first->cols || shape_.seed != first->seed) {
    return absl::InvalidArgumentError(absl::StrCat("sketch.rows/cols/seed: ", first->rows, " x ", first->cols, " seed ",
                                                   first->seed,
                                                   " differ from the reduction state's momentum and error sketches (",
                                                   shape_.rows, " x ", shape_.cols, " seed ", shape_.seed, ")"));
  }
  if (next_momentum_.size() != cells) {
    next_momentum_ = kernels::DeviceArray<float>(cells);
    next_error_ = kernels::DeviceArray<float>(cells);
    mask_ = kernels::DeviceArray<float>(cells);
    touched_ = kernels::DeviceArray<std::uint32_t>(cells);
    touched_val_ = kernels::DeviceArray<float>(cells);
  }
  // S_u' = rho * S_u + S / n;  S_e' = S_e + S_u'  (aside: the state changes only on success).
  next_momentum_.Zero();
  SKETCHPS_RETURN_IF_ERROR(
      kernels::Axpy(static_cast<float>(spec.momentum), momentum_.data(), next_momentum_.data(), cells, exec_));
  SKETCHPS_RETURN_IF_ERROR(
      kernels::Axpy(1.0f / static_cast<float>(contributors), acc_.data(), next_momentum_.data(), cells, exec_));
  next_error_.Zero();
  SKETCHPS_RETURN_IF_ERROR(kernels::Axpy(1.0f, error_.data(), next_error_.data(), cells, exec_));
  SKETCHPS_RETURN_IF_ERROR(kernels::Axpy(1.0f, next_momentum_.data(), next_error_.data(), cells, exec_));
  // Delta = the `keep` largest |estimates| of S_e'.
  SKETCHPS_ASSIGN_OR_RETURN(auto hash, CountSketchHash::Create({first->rows, first->cols, first->seed, dim_}));
  SKETCHPS_ASSIGN_OR_RETURN(std::size_t count, kernels::SketchRecover(next_error_.data(), hash, dim_, spec.keep,
                                                                      idx_.data(), val_.data(), exec_));
  SKETCHPS_RETURN_IF_ERROR(kernels::SortByIndex(idx_.data(), val_.data(), count, exec_));
  // Zero every cell of S_u' and S_e' where S(Delta) is nonzero (FetchSGD's code; the paper's S_e -= S(Delta)
  // diverged there, docs/methods.md "fetchsgd").
  mask_.Zero();
  SKETCHPS_RETURN_IF_ERROR(kernels::SketchAccumulateSparse(idx_.data(), val_.data(), count, hash, mask_.data(), exec_));
  // The nonzero cells (|mask| > 0), found and zeroed on the device: only their count crosses.
  SKETCHPS_ASSIGN_OR_RETURN(
      const std::size_t touched,
      kernels::ThresholdSelect(mask_.data(), cells, 0.0f, cells, touched_.data(), touched_val_.data(), exec_));
  SKETCHPS_RETURN_IF_ERROR(kernels::FillAt(next_momentum_.data(), cells, touched_.data(), touched, 0.0f, exec_));
  SKETCHPS_RETURN_IF_ERROR(kernels::FillAt(next_error_.data(), cells, touched_.data(), touched, 0.0f, exec_));
  SKETCHPS_ASSIGN_OR_RETURN(SparseVector out, Collect(count, /*drop_zeros=*/false));
  SKETCHPS_ASSIGN_OR_RETURN(const bool momentum_finite, kernels::AllFinite(next_momentum_.data(), cells, exec_));
  SKETCHPS_ASSIGN_OR_RETURN(const bool error_finite, kernels::AllFinite(next_error_.data(), cells, exec_));
  const auto n = static_cast<float>(contributors);
  for (float& v : out.val) v *= n;  // MeanAggregate divides by n again: G_t = Delta
  refused = !(momentum_finite && error_finite && AllFinite(PayloadValue{out}));
  if (refused) return PayloadValue{SparseVector{dim_, {}, {}}};
  std::swap(momentum_, next_momentum_);
  std::swap(error_, next_error_);
  return PayloadValue{std::move(out)};
}

ReductionState Reducer::State() const {
  if (momentum_.size() == 0) return {};
  return ReductionState{shape_.rows, shape_.cols, shape_.seed, momentum_.ToHost(), error_.ToHost()};
}

absl::Status Reducer::SetState(const ReductionState& state) {
  if (state.empty()) {
    momentum_ = kernels::DeviceArray<float>();
    error_ = kernels::DeviceArray<float>();
    shape_ = {};
    return absl::OkStatus();
  }
  const std::uint64_t cells = std::uint64_t{state.rows} * state.cols;
  if (state.rows == 0 || state.cols == 0 || state.momentum.size() != cells || state.error.size() != cells) {
    return absl::InvalidArgumentError(absl::StrCat("reduction state: ", state.rows, " x ", state.cols,
                                                   " sketches with ", state.momentum.size(), " momentum and ",
                                                   state.error.size(), " error cells"));
  }
  shape_ = ReductionState{state.rows, state.cols, state.seed, {}, {}};
  momentum_ = kernels::DeviceArray<float>(state.momentum);
  error_ = kernels::DeviceArray<float>(state.error);
  return absl::OkStatus();
}

absl::StatusOr<PayloadValue> Reducer::LeaderSet(const std::vector<const Contribution*>& in, std::uint32_t leader) {
  if (leader >= in.size()) return absl::InvalidArgumentError(absl::StrCat("spec.leader: ", leader, " is not a worker"));
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
