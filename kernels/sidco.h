// SIDCo threshold estimation (Abdelmoniem et al., MLSys 2021; docs/methods.md, sidco and decision 6).
//
// A SidcoEstimator turns a vector x (one shard's error-feedback-corrected gradient) into a threshold
// η such that about density·n entries have |x| > η. It fits a sparsity-inducing distribution to the
// magnitudes in closed form (common/distribution_fit.h) and inverts its tail, in M nested stages:
//   stage 1   fit the first-stage law (E: exponential, P: generalized Pareto, GP: gamma with the exact
//             inverse incomplete gamma) to the nonzero magnitudes and keep a fraction δ1 (0.25);
//   stage s   take the exceedances y = {|x| : |x| > η_{s-1}} (nested: a subset of the previous set),
//             fit the tail law (E: exponential, P/GP: generalized Pareto) to y - m0, m0 = min y, and
//             set η_s = m0 + (the fitted threshold that keeps a fraction q_s of y);
// with stage ratios whose product is the target (SidcoStageRatios). Each stage is one pass over x
// (kernels/stats.h) asking only for the moments its fit needs; on the CPU backend stage 1 of SIDCo-E
// costs about 1.1 streaming passes (SumAbs) and each later stage about 2.5 (branch-free, see
// stats.h). Selecting |x| > η is the caller's job (e.g. kernels::ThresholdSelect).
//
// Project choices, documented here because they differ from the reference code:
//   - No L2 normalisation of x: every fit is scale-equivariant and accumulates in double, so the
//     selection is unchanged by scaling x (the reason the reference normalises).
//   - Stage 1 fits the NONZERO magnitudes and aims at δ·n / nnz of them, so exact zeros (unused
//     embedding rows, masked entries) do not drag the fit down; with no zeros this is the reference.
//     The gamma log moment then needs no ε: every fitted sample is > 0.
//   - A stage whose exceedance set has fewer than 2 entries, or is degenerate for the fit (all equal),
//     ends the refinement; the estimate is the previous stage's threshold (SidcoEstimate::stages).
//     A first stage whose magnitudes are all equal uses the exponential fit (P and GP cannot fit it).
//   - Stage adaptation (stage_mode = kAdaptive) is a direction-searching rule in the spirit of the paper's
//     mode -2 (the direction is learned from the observed response, blocked steps search the other
//     side), which does not stick at M = 1 on heavy tails: see SidcoAdaptState and Record().
//
// Thread-safety: a SidcoEstimator is not thread-safe (one owner, like an Exec); Estimate() is const
// and only reads the state. Errors are absl::Status values naming the offending field; nothing aborts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace sketchps::kernels {

enum class SidcoVariant {
  kExponential,             // SIDCo-E: exponential in every stage
  kGeneralizedPareto,       // SIDCo-P: generalized Pareto in every stage
  kGammaGeneralizedPareto,  // SIDCo-GP: gamma first stage, generalized Pareto after
};

// The paper's short name: "E", "P" or "GP".
inline const char* SidcoVariantName(SidcoVariant v) {
  switch (v) {
    case SidcoVariant::kExponential: return "E";
    case SidcoVariant::kGeneralizedPareto: return "P";
    case SidcoVariant::kGammaGeneralizedPareto: return "GP";
  }
  return "?";
}

enum class SidcoStageMode {
  kFixed,          // always `stages` stages
  kPerStageRatio,  // the reference's M = 0: every later stage keeps per_stage_ratio (last one the rest)
  kAdaptive,       // the reference's M < 0: M adapted from the achieved density fed to Record()
};

struct SidcoOptions {
  SidcoVariant variant = SidcoVariant::kExponential;
  double density = 0.001;           // target δ = selected / n, in (0, 1]
  double first_stage_ratio = 0.25;  // δ1 (reference FIRST_RATIO), in (0, 1)
  SidcoStageMode stage_mode = SidcoStageMode::kAdaptive;
  int stages = 1;                     // kFixed: M in [1, 64]; kAdaptive: the initial M (clamped to the range)
  double per_stage_ratio = 0.2;       // kPerStageRatio: q per later stage, in (0, 1) (reference i_ratio)
  int adapt_window = 5;               // Q: calls per adaptation window (reference UPDATE_ITER), >= 1
  double adapt_tolerance_up = 0.2;    // ε_up: a window mean above 1 + ε_up selects too many (RES_DIFF_UP), >= 0
  double adapt_tolerance_down = 0.2;  // ε_down: below 1 - ε_down too few (RES_DIFF_DOWN), in [0, 1)
  int adapt_memory = 20;              // windows a per-M error record stays valid (0: no memory), >= 0
  int gamma_newton_steps = 3;         // Newton steps on the gamma shape MLE (0: SIDCo's closed form), [0, 20]
};

// OK, or InvalidArgument naming the first bad field ("SidcoOptions.density = ...").
absl::Status ValidateSidcoOptions(const SidcoOptions& options);

// Upper clamp of the adaptive stage count: ceil(log2(1 / density)), at least 1.
int SidcoMaxStages(double density);

// The tail fraction kept by each stage, in stage order; their product equals `tail`.
//   stages == 1 or tail >= first_ratio:  {tail}
//   stages >= 2:  {first_ratio, r^(1/(M-1)) repeated M-1 times}, r = tail / first_ratio
//   stages == 0:  {first_ratio, per_stage_ratio x (L-1), r / per_stage_ratio^(L-1)},
//                 L = ceil(ln r / ln per_stage_ratio)
// Errors: tail outside (0, 1], first_ratio or per_stage_ratio (when used) outside (0, 1), stages < 0.
absl::StatusOr<std::vector<double>> SidcoStageRatios(double tail, double first_ratio, int stages,
                                                     double per_stage_ratio);

// The adaptation state (checkpointed with the worker's compressor state; get/set as a plain value).
// Rule at the end of each window of Q calls, with ē the mean achieved/target ratio of the window:
//   1. direction := sign of the observed d(ē)/dM between the previous window and this one, when M
//      changed in between (+1: more stages select more, the light-tail case; -1: heavy tails);
//   2. remember |ē - 1| for the current M;
//   3. if ē is outside [1 - ε_down, 1 + ε_up], step M by +direction (too few) or -direction (too many).
//      A step is blocked when it leaves the clamp [1, SidcoMaxStages] or leads to an M whose remembered
//      error (at most adapt_memory windows old) is no smaller than the current one; a blocked step is
//      tried in the other direction instead, and when both are blocked M stays. So heavy-tailed
//      feedback at M = 1 moves on to M = 2 rather than sticking (the paper's caution), a count that is
//      not monotone in M is still searched, and M settles where its neighbours are known to be worse.
struct SidcoAdaptState {
  int stages = 1;                 // M used by the next Estimate()
  int direction = 1;              // +1 or -1, see rule 1
  int window_calls = 0;           // calls recorded in the current window, < adapt_window
  double window_ratio_sum = 0.0;  // Σ achieved/target over those calls
  std::uint64_t windows = 0;      // completed windows
  int previous_stages = 0;        // M of the last completed window (0: none yet)
  double previous_ratio = 0.0;    // its ē
  // Indexed by M (size SidcoMaxStages + 1, index 0 unused): last |ē - 1| seen with M stages (negative:
  // never) and the window number it was seen in.
  std::vector<double> error_by_stages;
  std::vector<std::uint64_t> window_by_stages;
};

// The result of one estimate.
struct SidcoEstimate {
  float threshold = 0.0f;      // select the entries with |x| > threshold
  int stages = 0;              // stages actually run (0: no fit was needed, threshold 0)
  std::uint64_t nonzeros = 0;  // nonzero entries of x
};

class SidcoEstimator {
 public:
  // Validates the options. The adaptive state starts at M = clamp(options.stages, 1, max), direction +1.
  static absl::StatusOr<SidcoEstimator> Create(const SidcoOptions& options);

  // The threshold for d_x[0..n) (device pointer). Zero when x has at most density·n nonzeros (then
  // every nonzero is selected) and for an all-zero or empty x (nothing is selected).
  // Errors: InvalidArgument for a null d_x with n > 0 or a null exec.scratch, and for non-finite
  // entries in x (the message says so; the caller's NaN/Inf guard should have caught them).
  absl::StatusOr<SidcoEstimate> Estimate(const float* d_x, std::size_t n, const Exec& exec) const;

  // Feeds back how many entries the caller actually selected out of n; drives the adaptive mode (a
  // no-op otherwise). Errors: InvalidArgument when n == 0 or achieved_count > n.
  absl::Status Record(std::size_t achieved_count, std::size_t n);

  const SidcoOptions& options() const { return options_; }
  const SidcoAdaptState& state() const { return state_; }
  // Restores a checkpointed state. Errors: InvalidArgument naming the field when it is inconsistent
  // with these options (stages outside the clamp, direction not ±1, window_calls >= adapt_window,
  // record vectors of the wrong size).
  absl::Status SetState(const SidcoAdaptState& state);

 private:
  explicit SidcoEstimator(const SidcoOptions& options);
  int PlannedStages() const;
  // Stages 2.. of Estimate: refines out.threshold / out.stages in place.
  absl::Status Refine(const float* d_x, std::size_t n, const std::vector<double>& ratios, const Exec& exec,
                      SidcoEstimate& out) const;
  void EndWindow(double mean_ratio);
  bool KnownWorse(int stages, double error) const;

  SidcoOptions options_;
  int max_stages_ = 1;
  SidcoAdaptState state_;
};

}  // namespace sketchps::kernels
