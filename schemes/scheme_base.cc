#include "schemes/scheme_base.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/wire/codec.h"
#include "kernels/vector_ops.h"
#include "schemes/recovery_check.h"

namespace sketchps {
namespace {

// Rounds the payload's dense or sparse values to `values` in place; returns the encoding they are
// now all exact in: `values`, or kF32 when one was beyond the format's range (or for sketch tables
// and index sets, whose encoding the wire chooses).
ValueEncoding RoundPushedValues(PayloadValue& payload, ValueEncoding values) {
  if (values == ValueEncoding::kF32) return values;
  std::vector<float>* v = nullptr;
  if (auto* dense = std::get_if<DenseValues>(&payload)) v = &dense->values;
  if (auto* sparse = std::get_if<SparseVector>(&payload)) v = &sparse->val;
  if (v == nullptr) return ValueEncoding::kF32;
  return RoundValues(*v, values) ? values : ValueEncoding::kF32;
}

}  // namespace

SchemeBase::SchemeBase(SchemeContext ctx) : ctx_(std::move(ctx)), exec_{nullptr, &scratch_} {}

absl::Status SchemeBase::BeginRound(const RoundInfo& info, const float* d_grad) {
  round_ = info;
  dense_round_ = info.round < ctx_.warmup_rounds;
  results_.clear();
  exact_.reset();
  diag_ = {};
  input_ = nullptr;
  selected_ = 0;
  grad_ = d_grad;
  skipped_ = true;
  if (info.sits_out) return absl::OkStatus();  // as a skip, decided by the caller (d_grad unread)
  SKETCHPS_ASSIGN_OR_RETURN(const bool finite, kernels::AllFinite(d_grad, ctx_.dim, exec_));
  skipped_ = !finite;
  if (skipped_) return absl::OkStatus();
  if (ctx_.may_be_left_out) {
    before_ = SaveState();
    if (carrying_) {
      SKETCHPS_RETURN_IF_ERROR(kernels::Axpy(1.0f, d_grad, carry_.data(), ctx_.dim, exec_));
      grad_ = carry_.data();
    }
  }
  SKETCHPS_ASSIGN_OR_RETURN(input_, Accumulate(info, grad_));
  if (dense_round_) {
    selected_ = ctx_.dim;
  } else {
    SKETCHPS_ASSIGN_OR_RETURN(diag_.input_sq, kernels::SumSquares(input_, ctx_.dim, exec_));
  }
  return absl::OkStatus();
}

std::uint32_t SchemeBase::NumPhases() const { return dense_round_ ? 1 : diagnostic_phases() + CompressedPhases(); }

std::uint32_t SchemeBase::PhasesIn(std::uint64_t round) const {
  if (round < ctx_.warmup_rounds) return 1;
  return (ctx_.diagnostics ? 1 : 0) + CompressedPhases();
}

absl::StatusOr<Contribution> SchemeBase::Contribute(std::uint32_t phase, const PhaseResult* previous) {
  if (phase >= NumPhases()) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": phase ", phase, " of a ", NumPhases(), "-phase round"));
  }
  const std::uint32_t first = diagnostic_phases();  // the round's phase holding the scheme's phase 0
  if (phase > 0) {
    if (previous == nullptr) return absl::InvalidArgumentError("Contribute: missing the previous phase's result");
    auto kept = std::make_shared<const PhaseResult>(*previous);
    if (phase == first) {
      exact_ = std::move(kept);
    } else {
      results_.push_back(std::move(kept));
    }
  }
  const bool dense = dense_round_ || phase < first;
  Contribution c;
  c.spec = dense ? PhaseSpec{Reduction::kDenseSum} : Spec(phase - first);
  c.spec.final_phase = phase + 1 == NumPhases();
  if (skipped_) return c;
  if (dense) {
    c.payload = DenseValues{ToHost(input_, ctx_.dim)};
  } else {
    SKETCHPS_ASSIGN_OR_RETURN(c.payload, Payload(phase - first, results_));
  }
  if (phase >= first) c.values = RoundPushedValues(*c.payload, ctx_.values);  // not the exact diagnostic sum
  return c;
}

absl::StatusOr<Aggregate> SchemeBase::Finish(const PhaseResult& last) {
  results_.push_back(std::make_shared<const PhaseResult>(last));
  const std::size_t done = results_.size() + (exact_ ? 1 : 0);
  if (done != NumPhases()) {
    return absl::FailedPreconditionError(absl::StrCat(name(), ": Finish after ", done, " of ", NumPhases(), " phases"));
  }
  SKETCHPS_ASSIGN_OR_RETURN(auto g, MeanAggregate(last, ctx_.dim));
  if (!dense_round_) OnAggregate(g);
  if (skipped_) return g;
  carrying_ = false;  // the carried gradient went into this round
  if (dense_round_) {
    OnDenseSent();
  } else {
    SKETCHPS_RETURN_IF_ERROR(Update(g, results_));
    SKETCHPS_RETURN_IF_ERROR(Diagnose(g));
  }
  return g;
}

absl::StatusOr<Aggregate> SchemeBase::FinishExcluded(const PhaseResult& last) {
  if (!ctx_.may_be_left_out) {
    return absl::FailedPreconditionError(
        absl::StrCat(name(), ": left out of round ", round_.round, " by a deadline this worker was not told of"));
  }
  SKETCHPS_ASSIGN_OR_RETURN(auto g, MeanAggregate(last, ctx_.dim));
  selected_ = 0;
  diag_ = {};
  if (!skipped_) {  // a skipped round accumulated nothing: nothing to restore or carry
    SKETCHPS_RETURN_IF_ERROR(RestoreState(before_));
    if (!carrying_) {
      if (carry_.size() != ctx_.dim) carry_ = kernels::DeviceArray<float>(ctx_.dim);
      SKETCHPS_RETURN_IF_ERROR(kernels::Copy(grad_, carry_.data(), ctx_.dim, exec_));
      carrying_ = true;
    }  // else carry_ already holds this round's gradient with the earlier ones
  }
  if (!dense_round_) OnAggregate(g);  // as every worker does in Finish (after the restore)
  return g;
}

std::vector<float> SchemeBase::CarriedGradient() const {
  return carrying_ ? ToHost(carry_.data(), ctx_.dim) : std::vector<float>();
}

absl::Status SchemeBase::RestoreCarriedGradient(const std::vector<float>& carried) {
  if (carried.empty()) {
    carrying_ = false;
    return absl::OkStatus();
  }
  if (carried.size() != ctx_.dim) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": a carried gradient of ", carried.size(), " values for a range of ", ctx_.dim));
  }
  if (carry_.size() != ctx_.dim) carry_ = kernels::DeviceArray<float>(ctx_.dim);
  kernels::CopyToDevice(carry_.data(), carried.data(), ctx_.dim * sizeof(float));
  carrying_ = true;
  return absl::OkStatus();
}

absl::Status SchemeBase::ObserveFetched(std::uint64_t round, const Aggregate& g) {
  diag_ = {};  // a round this worker did not compute: only the floor's verdict (OnAggregate) is its
  if (round >= ctx_.warmup_rounds) OnAggregate(g);
  return absl::OkStatus();
}

absl::Status SchemeBase::Diagnose(const Aggregate& g) {
  diag_.compressed = true;
  if (const float* e = residual_data()) {
    diag_.has_residual = true;
    SKETCHPS_ASSIGN_OR_RETURN(diag_.residual_sq, kernels::SumSquares(e, ctx_.dim, exec_));
  }
  if (!exact_) return absl::OkStatus();
  // A refused exact phase (an overflowing sum) carries nothing to compare with.
  if (exact_->refused) return absl::OkStatus();
  // The scheme's first phase proposes candidates when more phases follow it.
  const std::vector<std::uint32_t>* candidates = results_.size() > 1 ? ResultIndices(*results_.front()) : nullptr;
  return CompareWithExact(exact_->value, g, ctx_.dim, ctx_.k, candidates, diag_);
}

std::vector<float> SchemeBase::ToHost(const float* d_x, std::size_t n) const {
  std::vector<float> out(n);
  kernels::CopyToHost(out.data(), d_x, n * sizeof(float));
  return out;
}

}  // namespace sketchps
