#include "schemes/scheme_base.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/vector_ops.h"

namespace sketchps {

SchemeBase::SchemeBase(SchemeContext ctx) : ctx_(std::move(ctx)), exec_{nullptr, &scratch_} {}

absl::Status SchemeBase::BeginRound(const RoundInfo& info, const float* d_grad) {
  round_ = info;
  dense_round_ = info.round < ctx_.warmup_rounds;
  results_.clear();
  input_ = nullptr;
  selected_ = 0;
  SKETCHPS_ASSIGN_OR_RETURN(const bool finite, kernels::AllFinite(d_grad, ctx_.dim, exec_));
  skipped_ = !finite;
  if (skipped_) return absl::OkStatus();
  SKETCHPS_ASSIGN_OR_RETURN(input_, Accumulate(info, d_grad));
  if (dense_round_) selected_ = ctx_.dim;
  return absl::OkStatus();
}

std::uint32_t SchemeBase::NumPhases() const { return dense_round_ ? 1 : CompressedPhases(); }

absl::StatusOr<Contribution> SchemeBase::Contribute(std::uint32_t phase, const PhaseResult* previous) {
  if (phase >= NumPhases()) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": phase ", phase, " of a ", NumPhases(), "-phase round"));
  }
  if (phase > 0) {
    if (previous == nullptr) return absl::InvalidArgumentError("Contribute: missing the previous phase's result");
    results_.push_back(std::make_shared<const PhaseResult>(*previous));
  }
  Contribution c;
  c.spec = dense_round_ ? PhaseSpec{Reduction::kDenseSum} : Spec(phase);
  c.spec.final_phase = phase + 1 == NumPhases();
  if (skipped_) return c;
  if (dense_round_) {
    c.payload = DenseValues{ToHost(input_, ctx_.dim)};
  } else {
    SKETCHPS_ASSIGN_OR_RETURN(c.payload, Payload(phase, results_));
  }
  return c;
}

absl::StatusOr<Aggregate> SchemeBase::Finish(const PhaseResult& last) {
  results_.push_back(std::make_shared<const PhaseResult>(last));
  if (results_.size() != NumPhases()) {
    return absl::FailedPreconditionError(
        absl::StrCat(name(), ": Finish after ", results_.size(), " of ", NumPhases(), " phases"));
  }
  SKETCHPS_ASSIGN_OR_RETURN(auto g, MeanAggregate(last, ctx_.dim));
  if (skipped_) return g;
  if (dense_round_) {
    OnDenseSent();
  } else {
    SKETCHPS_RETURN_IF_ERROR(Update(g, results_));
  }
  return g;
}

std::vector<float> SchemeBase::ToHost(const float* d_x, std::size_t n) const {
  std::vector<float> out(n);
  kernels::CopyToHost(out.data(), d_x, n * sizeof(float));
  return out;
}

}  // namespace sketchps
