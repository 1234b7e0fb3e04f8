#include "worker/local_steps.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/vector_ops.h"

namespace sketchps::worker {

LocalSteps::LocalSteps(const OptimizerConfig& inner, const LayerTable& layers, std::uint64_t steps_per_round,
                       bool keep_state)
    : dim_(layers.dim()),
      steps_per_round_(steps_per_round),
      keep_(keep_state),
      inner_(inner, dim_, /*global_momentum=*/true, layers),
      exec_{nullptr, &scratch_},
      start_(dim_),
      delta_(dim_) {}

absl::Status LocalSteps::Begin(const float* d_params) {
  SKETCHPS_RETURN_IF_ERROR(kernels::Copy(d_params, start_.data(), dim_, exec_));
  if (!keep_) inner_.ResetState();
  begun_ = true;
  return absl::OkStatus();
}

absl::Status LocalSteps::Step(const float* d_grads, float* d_params, std::uint64_t round, std::uint64_t step,
                              double epoch) {
  if (!begun_) return absl::FailedPreconditionError("LocalSteps::Step before Begin");
  // Adam's t - 1: the step in the round when the state starts afresh, else the step in the job.
  const std::uint64_t count = keep_ ? round * steps_per_round_ + step : step;
  return inner_.ApplyDense(d_grads, d_params, StepClock{count, epoch});
}

std::vector<float> LocalSteps::SaveLocal() const { return keep_ ? inner_.State() : std::vector<float>{}; }

std::uint64_t LocalSteps::local_size() const { return keep_ ? inner_.state_size() : 0; }

absl::Status LocalSteps::RestoreLocal(const std::vector<float>& state) {
  if (state.size() != local_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the inner optimizer's state has ", state.size(), " values, this worker's has ", local_size()));
  }
  if (!keep_) return absl::OkStatus();
  return inner_.SetState(state);
}

absl::StatusOr<const float*> LocalSteps::Finish(float* d_params) {
  if (!begun_) return absl::FailedPreconditionError("LocalSteps::Finish before Begin");
  begun_ = false;
  SKETCHPS_RETURN_IF_ERROR(kernels::Copy(start_.data(), delta_.data(), dim_, exec_));
  SKETCHPS_RETURN_IF_ERROR(kernels::Axpy(-1.0f, d_params, delta_.data(), dim_, exec_));
  SKETCHPS_RETURN_IF_ERROR(kernels::Copy(start_.data(), d_params, dim_, exec_));
  return static_cast<const float*>(delta_.data());
}

}  // namespace sketchps::worker
