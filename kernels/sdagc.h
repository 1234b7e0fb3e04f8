// SDAGC per-layer thresholds (docs/methods.md, sdagc and decision 5; a reconstruction: the paper's
// exact formula is not public).
//
// For layer l of the flat vector a (the worker's accumulated, momentum-corrected vector), the
// threshold is τ_l = λ_t · σ_l, where σ_l is the population standard deviation of the layer's signed
// values (the most literal reading of "standard deviation of gradients"), and the selection is
// {i : |a_i| > τ_l} (the caller's job, e.g. kernels::ThresholdSelect per layer). λ_t comes from
//   - a warm-up schedule (SdagcLambda): linear in time (rounds, in schemes/sdagc.h) from
//     lambda_initial = 1.0 to lambda_final over the warm-up, constant afterwards; and optionally
//   - a closed loop (SdagcLambdaController) that nudges λ toward a target density from the achieved one.
//
// Default lambda_final = 3.09: on Gaussian-like layers the selected fraction is erfc(3.09/√2) = 0.0020
// (500x fewer entries, so >= 400x compression as decision 5 requires). Heavier-tailed layers select
// more at the same λ (Laplace: exp(-√2 λ) = 0.013; Student-t3: 0.013); use the closed loop (or
// λ ≈ 4.3-5.4 for Laplace-like layers) when the measured density matters more than the schedule.
//
// Thresholds are scale-equivariant (scaling a layer by c scales τ_l by c; the selection is unchanged).
// Thread-safety: the functions are reentrant given distinct Execs; a controller has one owner.
// Errors: absl::Status naming the offending argument or field; nothing aborts on input.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/stats.h"

namespace sketchps::kernels {

// The default λ_final: erfc(3.09 / √2) = 0.002001 (two-sided Gaussian tail).
inline constexpr double kSdagcDefaultLambdaFinal = 3.09;

struct SdagcSchedule {
  double lambda_initial = 1.0;                     // λ at t = 0, > 0
  double lambda_final = kSdagcDefaultLambdaFinal;  // λ after warm-up, > 0
  double warmup = 4.0;                             // length of the ramp (the unit of t), >= 0 (0: no ramp)
};

// OK, or InvalidArgument naming the field ("SdagcSchedule.lambda_final = ...").
absl::Status ValidateSdagcSchedule(const SdagcSchedule& schedule);

// λ at time t >= 0 (any unit, the one of `warmup`): lambda_initial + (lambda_final - lambda_initial) ·
// min(t / warmup, 1); lambda_final when warmup == 0 or t >= warmup. Pass floor(t) for a staircase.
// Negative t counts as 0. Assumes a validated schedule.
double SdagcLambda(const SdagcSchedule& schedule, double t);

// τ_l = lambda · σ_l for every layer of d_x[0..n) (device pointer), in layer order, rounded to float.
// An empty layer gets τ = 0. One pass over each layer (kernels::SegmentMeanStd).
// Errors: lambda not finite and > 0, layers outside [0, n), null pointers, non-finite layer values
// (the message names the layer).
absl::StatusOr<std::vector<float>> SdagcThresholds(const float* d_x, std::size_t n, const std::vector<Segment>& layers,
                                                   double lambda, const Exec& exec);

// Closed-loop λ toward a target density.
struct SdagcControllerOptions {
  double target_density = 0.002;  // in (0, 1)
  double gain = 1.0;              // step scale in (0, 2]
  double min_lambda = 0.5;        // clamp, 0 < min_lambda <= max_lambda
  double max_lambda = 12.0;
};

// After each step, Record(selected, n) moves λ by gain · ln(achieved / target) / (λ + 1/λ): a Newton
// step on ln(density) for Gaussian layers, whose log-tail slope is about -(λ + 1/λ) (Mills ratio);
// heavier tails have a smaller slope, so the step undershoots and the loop converges geometrically
// instead of oscillating. A step with nothing selected counts as half an entry (finite log).
// Not thread-safe; lambda() is the value to use for the next step.
class SdagcLambdaController {
 public:
  // Errors: invalid options (the message names the field) or initial_lambda outside the clamp.
  static absl::StatusOr<SdagcLambdaController> Create(const SdagcControllerOptions& options, double initial_lambda);

  double lambda() const { return lambda_; }
  // Errors: n == 0 or selected > n.
  absl::Status Record(std::size_t selected, std::size_t n);
  // Checkpoint support: the only state is λ. Errors: lambda outside the clamp or not finite.
  absl::Status SetLambda(double lambda);

 private:
  SdagcLambdaController(const SdagcControllerOptions& options, double lambda) : options_(options), lambda_(lambda) {}

  SdagcControllerOptions options_;
  double lambda_;
};

}  // namespace sketchps::kernels
