// SIDCo threshold estimation (see sidco.h). Host orchestration only: the passes over x are the
// statistics kernels of kernels/stats.h, the fits are common/distribution_fit.h.
#include "kernels/sidco.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/distribution_fit.h"
#include "common/status.h"
#include "kernels/internal/pointer_check.h"
#include "kernels/stats.h"

namespace sketchps::kernels {
namespace {

constexpr int kMaxFixedStages = 64;
constexpr int kMaxNewtonSteps = 20;

absl::Status OptionError(const char* field, double value, const char* requirement) {
  return absl::InvalidArgumentError(absl::StrCat("SidcoOptions.", field, " = ", value, ": ", requirement));
}

bool InUnitOpen(double v) { return v > 0.0 && v < 1.0; }

// The threshold keeping a fraction q of a sample with moments m, for the law `use_gamma` / `use_gp`
// (else exponential).
absl::StatusOr<double> FitThreshold(const SampleMoments& m, double q, bool use_gamma, bool use_gp, int newton_steps) {
  if (use_gamma) {
    SKETCHPS_ASSIGN_OR_RETURN(const GammaFit fit, FitGamma(m, newton_steps));
    return GammaTailThreshold(fit, q);
  }
  if (use_gp) {
    SKETCHPS_ASSIGN_OR_RETURN(const GeneralizedParetoFit fit, FitGeneralizedPareto(m));
    return GeneralizedParetoTailThreshold(fit, q);
  }
  SKETCHPS_ASSIGN_OR_RETURN(const ExponentialFit fit, FitExponential(m));
  return ExponentialTailThreshold(fit, q);
}

// A fit cannot use this sample: too few entries, or all equal (zero variance for the generalized
// Pareto/gamma fits, which have Σy²; a zero mean of the shifted sample for the exponential).
bool Degenerate(const SampleMoments& m, bool has_sum_sq) {
  if (m.count < 2) return true;
  return has_sum_sq ? !(m.Variance() > 0.0) : !(m.sum > 0.0);
}

}  // namespace

absl::Status ValidateSidcoOptions(const SidcoOptions& o) {
  if (!(o.density > 0.0 && o.density <= 1.0)) return OptionError("density", o.density, "must be in (0, 1]");
  if (!InUnitOpen(o.first_stage_ratio)) {
    return OptionError("first_stage_ratio", o.first_stage_ratio, "must be in (0, 1)");
  }
  if (o.stages < 1 || o.stages > kMaxFixedStages) {
    return OptionError("stages", o.stages, "must be in [1, 64] (use stage_mode for the other modes)");
  }
  if (!InUnitOpen(o.per_stage_ratio)) return OptionError("per_stage_ratio", o.per_stage_ratio, "must be in (0, 1)");
  if (o.adapt_window < 1) return OptionError("adapt_window", o.adapt_window, "must be >= 1");
  if (!(o.adapt_tolerance_up >= 0.0 && std::isfinite(o.adapt_tolerance_up))) {
    return OptionError("adapt_tolerance_up", o.adapt_tolerance_up, "must be finite and >= 0");
  }
  if (!(o.adapt_tolerance_down >= 0.0 && o.adapt_tolerance_down < 1.0)) {
    return OptionError("adapt_tolerance_down", o.adapt_tolerance_down, "must be in [0, 1)");
  }
  if (o.adapt_memory < 0) return OptionError("adapt_memory", o.adapt_memory, "must be >= 0");
  if (o.gamma_newton_steps < 0 || o.gamma_newton_steps > kMaxNewtonSteps) {
    return OptionError("gamma_newton_steps", o.gamma_newton_steps, "must be in [0, 20]");
  }
  return absl::OkStatus();
}

int SidcoMaxStages(double density) {
  if (!(density > 0.0 && density < 0.5)) return 1;
  return std::max(1, static_cast<int>(std::ceil(std::log2(1.0 / density) - 1e-12)));
}

absl::StatusOr<std::vector<double>> SidcoStageRatios(double tail, double first_ratio, int stages,
                                                     double per_stage_ratio) {
  if (!(tail > 0.0 && tail <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("SidcoStageRatios: tail = ", tail, " is not in (0, 1]"));
  }
  if (!InUnitOpen(first_ratio)) {
    return absl::InvalidArgumentError(absl::StrCat("SidcoStageRatios: first_ratio = ", first_ratio, " not in (0, 1)"));
  }
  if (stages < 0) return absl::InvalidArgumentError(absl::StrCat("SidcoStageRatios: stages = ", stages, " < 0"));
  if (stages == 1 || tail >= first_ratio) return std::vector<double>{tail};
  const double rest = tail / first_ratio;
  std::vector<double> ratios = {first_ratio};
  if (stages >= 2) {
    ratios.insert(ratios.end(), stages - 1, std::pow(rest, 1.0 / (stages - 1)));
    return ratios;
  }
  if (!InUnitOpen(per_stage_ratio)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SidcoStageRatios: per_stage_ratio = ", per_stage_ratio, " not in (0, 1)"));
  }
  // The 1e-9 keeps an exact power (rest == per_stage_ratio^k) at k stages despite rounding.
  const int later = std::max(1, static_cast<int>(std::ceil(std::log(rest) / std::log(per_stage_ratio) - 1e-9)));
  ratios.insert(ratios.end(), later - 1, per_stage_ratio);
  ratios.push_back(rest / std::pow(per_stage_ratio, later - 1));
  return ratios;
}

SidcoEstimator::SidcoEstimator(const SidcoOptions& options)
    : options_(options), max_stages_(SidcoMaxStages(options.density)) {
  state_.stages = std::clamp(options.stages, 1, max_stages_);
  state_.error_by_stages.assign(max_stages_ + 1, -1.0);
  state_.window_by_stages.assign(max_stages_ + 1, 0);
}

absl::StatusOr<SidcoEstimator> SidcoEstimator::Create(const SidcoOptions& options) {
  SKETCHPS_RETURN_IF_ERROR(ValidateSidcoOptions(options));
  return SidcoEstimator(options);
}

int SidcoEstimator::PlannedStages() const {
  switch (options_.stage_mode) {
    case SidcoStageMode::kFixed: return options_.stages;
    case SidcoStageMode::kPerStageRatio: return 0;
    case SidcoStageMode::kAdaptive: return state_.stages;
  }
  return 1;
}

absl::StatusOr<SidcoEstimate> SidcoEstimator::Estimate(const float* d_x, std::size_t n, const Exec& exec) const {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExec("SidcoEstimator::Estimate", exec));
  const SidcoVariant v = options_.variant;
  const bool shaped_first = v != SidcoVariant::kExponential;  // GP or gamma: needs the variance check
  MomentSet first_moments{shaped_first, v == SidcoVariant::kGammaGeneralizedPareto, false};
  SKETCHPS_ASSIGN_OR_RETURN(const SampleMoments all, ExceedanceStats(d_x, n, 0.0f, first_moments, exec));
  if (!std::isfinite(all.sum)) {
    return absl::InvalidArgumentError("SidcoEstimator::Estimate: x contains NaN or Inf entries");
  }
  SidcoEstimate out;
  out.nonzeros = all.count;
  const double target = options_.density * static_cast<double>(n);
  if (static_cast<double>(all.count) <= target) return out;  // keep every nonzero (or nothing at all)
  SKETCHPS_ASSIGN_OR_RETURN(const std::vector<double> ratios,
                            SidcoStageRatios(target / static_cast<double>(all.count), options_.first_stage_ratio,
                                             PlannedStages(), options_.per_stage_ratio));
  // A sample the gamma/GP fits cannot describe (all magnitudes equal) falls back to the exponential.
  const bool shaped = shaped_first && !Degenerate(all, true);
  SKETCHPS_ASSIGN_OR_RETURN(const double first,
                            FitThreshold(all, ratios[0], shaped && v == SidcoVariant::kGammaGeneralizedPareto,
                                         shaped && v == SidcoVariant::kGeneralizedPareto, options_.gamma_newton_steps));
  out.threshold = static_cast<float>(first);
  out.stages = 1;
  SKETCHPS_RETURN_IF_ERROR(Refine(d_x, n, ratios, exec, out));
  return out;
}

absl::Status SidcoEstimator::Refine(const float* d_x, std::size_t n, const std::vector<double>& ratios,
                                    const Exec& exec, SidcoEstimate& out) const {
  const bool gp_tail = options_.variant != SidcoVariant::kExponential;
  const MomentSet moments{gp_tail, false, true};  // the exponential needs no Σy²
  for (std::size_t s = 1; s < ratios.size(); ++s) {
    SKETCHPS_ASSIGN_OR_RETURN(const SampleMoments above, ExceedanceStats(d_x, n, out.threshold, moments, exec));
    // ExceedanceStats shifts by the threshold; shifting further by the minimum gives y - min(y).
    const double m0 = above.min;
    const SampleMoments shifted = ShiftMoments(above, m0);
    if (Degenerate(shifted, gp_tail)) break;
    SKETCHPS_ASSIGN_OR_RETURN(const double t, FitThreshold(shifted, ratios[s], false, gp_tail, 0));
    out.threshold = static_cast<float>(static_cast<double>(out.threshold) + m0 + t);
    out.stages = static_cast<int>(s) + 1;
  }
  return absl::OkStatus();
}

absl::Status SidcoEstimator::Record(std::size_t achieved_count, std::size_t n) {
  if (n == 0) return absl::InvalidArgumentError("SidcoEstimator::Record: n = 0");
  if (achieved_count > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("SidcoEstimator::Record: achieved_count = ", achieved_count, " exceeds n = ", n));
  }
  if (options_.stage_mode != SidcoStageMode::kAdaptive) return absl::OkStatus();
  state_.window_ratio_sum += static_cast<double>(achieved_count) / (options_.density * static_cast<double>(n));
  if (++state_.window_calls < options_.adapt_window) return absl::OkStatus();
  EndWindow(state_.window_ratio_sum / options_.adapt_window);
  return absl::OkStatus();
}

bool SidcoEstimator::KnownWorse(int stages, double error) const {
  const double seen = state_.error_by_stages[stages];
  if (seen < 0.0) return false;
  const std::uint64_t age = state_.windows - state_.window_by_stages[stages];
  return age < static_cast<std::uint64_t>(options_.adapt_memory) && seen >= error;
}

void SidcoEstimator::EndWindow(double ratio) {
  SidcoAdaptState& st = state_;
  const int m = st.stages;
  const double error = std::fabs(ratio - 1.0);
  if (st.previous_stages != 0 && st.previous_stages != m && ratio != st.previous_ratio) {
    st.direction = (ratio - st.previous_ratio) * (m - st.previous_stages) > 0.0 ? 1 : -1;
  }
  st.error_by_stages[m] = error;
  st.window_by_stages[m] = st.windows;
  st.previous_stages = m;
  st.previous_ratio = ratio;
  const bool too_few = ratio < 1.0 - options_.adapt_tolerance_down;
  const bool too_many = ratio > 1.0 + options_.adapt_tolerance_up;
  if (too_few || too_many) {
    // Step the believed way; when that is blocked (clamp, or a neighbour remembered to be no better),
    // search the other side: the count need not be monotone in M (e.g. SIDCo-GP on Gaussian data).
    const int step = too_few ? st.direction : -st.direction;
    for (const int next : {m + step, m - step}) {
      if (next >= 1 && next <= max_stages_ && !KnownWorse(next, error)) {
        st.stages = next;
        break;
      }
    }
  }
  ++st.windows;
  st.window_calls = 0;
  st.window_ratio_sum = 0.0;
}

absl::Status SidcoEstimator::SetState(const SidcoAdaptState& state) {
  auto bad = [](const char* field, double value) {
    return absl::InvalidArgumentError(absl::StrCat("SidcoEstimator::SetState: SidcoAdaptState.", field, " = ", value,
                                                   " is inconsistent with the options"));
  };
  if (state.stages < 1 || state.stages > max_stages_) return bad("stages", state.stages);
  if (state.direction != 1 && state.direction != -1) return bad("direction", state.direction);
  if (state.window_calls < 0 || state.window_calls >= options_.adapt_window)
    return bad("window_calls", state.window_calls);
  if (!std::isfinite(state.window_ratio_sum)) return bad("window_ratio_sum", state.window_ratio_sum);
  if (state.previous_stages < 0 || state.previous_stages > max_stages_) {
    return bad("previous_stages", state.previous_stages);
  }
  const std::size_t size = static_cast<std::size_t>(max_stages_) + 1;
  if (state.error_by_stages.size() != size) return bad("error_by_stages.size()", state.error_by_stages.size());
  if (state.window_by_stages.size() != size) return bad("window_by_stages.size()", state.window_by_stages.size());
  state_ = state;
  return absl::OkStatus();
}

}  // namespace sketchps::kernels
