// SDAGC per-layer thresholds and λ schedule (see sdagc.h). Host orchestration only: the pass over
// each layer is kernels::SegmentMeanStd.
#include "kernels/sdagc.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/internal/pointer_check.h"

namespace sketchps::kernels {
namespace {

absl::Status FieldError(const char* type, const char* field, double value, const char* requirement) {
  return absl::InvalidArgumentError(absl::StrCat(type, ".", field, " = ", value, ": ", requirement));
}

bool PositiveFinite(double v) { return std::isfinite(v) && v > 0.0; }

absl::Status ValidateControllerOptions(const SdagcControllerOptions& o) {
  constexpr const char* kType = "SdagcControllerOptions";
  if (!(o.target_density > 0.0 && o.target_density < 1.0)) {
    return FieldError(kType, "target_density", o.target_density, "must be in (0, 1)");
  }
  if (!(o.gain > 0.0 && o.gain <= 2.0)) return FieldError(kType, "gain", o.gain, "must be in (0, 2]");
  if (!PositiveFinite(o.min_lambda)) return FieldError(kType, "min_lambda", o.min_lambda, "must be finite and > 0");
  if (!(std::isfinite(o.max_lambda) && o.max_lambda >= o.min_lambda)) {
    return FieldError(kType, "max_lambda", o.max_lambda, "must be finite and >= min_lambda");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSdagcSchedule(const SdagcSchedule& s) {
  if (!PositiveFinite(s.lambda_initial)) {
    return FieldError("SdagcSchedule", "lambda_initial", s.lambda_initial, "must be finite and > 0");
  }
  if (!PositiveFinite(s.lambda_final)) {
    return FieldError("SdagcSchedule", "lambda_final", s.lambda_final, "must be finite and > 0");
  }
  if (!(std::isfinite(s.warmup) && s.warmup >= 0.0)) {
    return FieldError("SdagcSchedule", "warmup", s.warmup, "must be finite and >= 0");
  }
  return absl::OkStatus();
}

double SdagcLambda(const SdagcSchedule& s, double t) {
  if (!(s.warmup > 0.0) || t >= s.warmup) return s.lambda_final;
  const double progress = std::max(t, 0.0) / s.warmup;
  return s.lambda_initial + (s.lambda_final - s.lambda_initial) * progress;
}

absl::StatusOr<std::vector<float>> SdagcThresholds(const float* d_x, std::size_t n, const std::vector<Segment>& layers,
                                                   double lambda, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExec("SdagcThresholds", exec));
  if (!PositiveFinite(lambda)) {
    return absl::InvalidArgumentError(absl::StrCat("SdagcThresholds: lambda = ", lambda, " must be finite and > 0"));
  }
  SKETCHPS_ASSIGN_OR_RETURN(const std::vector<MeanStd> stats, SegmentMeanStd(d_x, n, layers, exec));
  std::vector<float> tau(layers.size());
  for (std::size_t l = 0; l < layers.size(); ++l) {
    if (!std::isfinite(stats[l].mean) || !std::isfinite(stats[l].stddev)) {
      return absl::InvalidArgumentError(absl::StrCat("SdagcThresholds: layers[", l, "] contains NaN or Inf values"));
    }
    tau[l] = static_cast<float>(lambda * stats[l].stddev);
  }
  return tau;
}

absl::StatusOr<SdagcLambdaController> SdagcLambdaController::Create(const SdagcControllerOptions& options,
                                                                    double initial_lambda) {
  SKETCHPS_RETURN_IF_ERROR(ValidateControllerOptions(options));
  SdagcLambdaController controller(options, options.min_lambda);
  SKETCHPS_RETURN_IF_ERROR(controller.SetLambda(initial_lambda));
  return controller;
}

absl::Status SdagcLambdaController::Record(std::size_t selected, std::size_t n) {
  if (n == 0) return absl::InvalidArgumentError("SdagcLambdaController::Record: n = 0");
  if (selected > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("SdagcLambdaController::Record: selected = ", selected, " exceeds n = ", n));
  }
  const double achieved = std::max(static_cast<double>(selected), 0.5) / static_cast<double>(n);
  const double step = options_.gain * std::log(achieved / options_.target_density) / (lambda_ + 1.0 / lambda_);
  lambda_ = std::clamp(lambda_ + step, options_.min_lambda, options_.max_lambda);
  return absl::OkStatus();
}

absl::Status SdagcLambdaController::SetLambda(double lambda) {
  if (!(std::isfinite(lambda) && lambda >= options_.min_lambda && lambda <= options_.max_lambda)) {
    return absl::InvalidArgumentError(absl::StrCat("SdagcLambdaController: lambda = ", lambda, " is outside [",
                                                   options_.min_lambda, ", ", options_.max_lambda, "]"));
  }
  lambda_ = lambda;
  return absl::OkStatus();
}

}  // namespace sketchps::kernels
