// Distribution fits and tail thresholds (see distribution_fit.h).
#include "common/distribution_fit.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include <boost/math/special_functions/digamma.hpp>
#include <boost/math/special_functions/gamma.hpp>
#include <boost/math/special_functions/trigamma.hpp>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sketchps {
namespace {

// Below this |ξ| the generalized Pareto is treated as exponential (docs/methods.md, decision 6).
constexpr double kExponentialShape = 1e-12;
// Below this s = ln(mean) - mean(ln y) the gamma shape (about 1 / 2s) is beyond 5e11: a degenerate sample.
constexpr double kMinGammaLogGap = 1e-12;

absl::Status CheckTailProbability(double q, const char* fn) {
  if (!(q > 0.0 && q <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": tail probability q = ", q, " is not in (0, 1]"));
  }
  return absl::OkStatus();
}

absl::Status CheckScale(double scale, const char* fn) {
  if (!(std::isfinite(scale) && scale > 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": scale = ", scale, " is not finite and positive"));
  }
  return absl::OkStatus();
}

// count >= min_count and finite sums with a positive mean.
absl::Status CheckMoments(const SampleMoments& m, std::uint64_t min_count, const char* fn) {
  if (m.count < min_count) {
    return absl::InvalidArgumentError(
        absl::StrCat(fn, ": moments.count = ", m.count, " but the fit needs at least ", min_count, " samples"));
  }
  if (!std::isfinite(m.sum)) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": moments.sum = ", m.sum, " (non-finite input)"));
  }
  if (!(m.sum > 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": moments.sum = ", m.sum, " (the mean must be positive)"));
  }
  return absl::OkStatus();
}

}  // namespace

double SampleMoments::Variance() const {
  if (count == 0) return 0.0;
  const double n = static_cast<double>(count);
  const double mean = sum / n;
  return std::max(0.0, sum_sq / n - mean * mean);
}

SampleMoments ShiftMoments(const SampleMoments& m, double shift) {
  SampleMoments out = m;
  const double n = static_cast<double>(m.count);
  out.sum = m.sum - n * shift;
  out.sum_sq = m.sum_sq - 2.0 * shift * m.sum + n * shift * shift;
  if (shift != 0.0) out.sum_log = std::numeric_limits<double>::quiet_NaN();
  if (m.count > 0) {
    out.min = m.min - shift;
    out.max = m.max - shift;
  }
  return out;
}

// ---- Exponential ----------------------------------------------------------------------------------

absl::StatusOr<ExponentialFit> FitExponential(const SampleMoments& m) {
  SKETCHPS_RETURN_IF_ERROR(CheckMoments(m, 1, "FitExponential"));
  return ExponentialFit{m.Mean()};
}

double ExponentialTail(const ExponentialFit& fit, double t) { return t <= 0.0 ? 1.0 : std::exp(-t / fit.scale); }

absl::StatusOr<double> ExponentialTailThreshold(const ExponentialFit& fit, double q) {
  SKETCHPS_RETURN_IF_ERROR(CheckTailProbability(q, "ExponentialTailThreshold"));
  SKETCHPS_RETURN_IF_ERROR(CheckScale(fit.scale, "ExponentialTailThreshold"));
  return -fit.scale * std::log(q);
}

// ---- Generalized Pareto ---------------------------------------------------------------------------

absl::StatusOr<GeneralizedParetoFit> FitGeneralizedPareto(const SampleMoments& m) {
  SKETCHPS_RETURN_IF_ERROR(CheckMoments(m, 2, "FitGeneralizedPareto"));
  if (!std::isfinite(m.sum_sq)) {
    return absl::InvalidArgumentError(
        absl::StrCat("FitGeneralizedPareto: moments.sum_sq = ", m.sum_sq, " (not computed, or non-finite input)"));
  }
  const double mean = m.Mean();
  const double var = m.Variance();
  if (!(var > 0.0)) {
    return absl::InvalidArgumentError("FitGeneralizedPareto: the sample variance is zero (all samples equal)");
  }
  const double rho = mean * mean / var;
  return GeneralizedParetoFit{0.5 * (1.0 - rho), 0.5 * mean * (rho + 1.0)};
}

double GeneralizedParetoTail(const GeneralizedParetoFit& fit, double t) {
  if (t <= 0.0) return 1.0;
  if (std::fabs(fit.shape) < kExponentialShape) return std::exp(-t / fit.scale);
  const double base = 1.0 + fit.shape * t / fit.scale;
  if (base <= 0.0) return 0.0;  // beyond the upper end point of a bounded (ξ < 0) law
  return std::exp(-std::log(base) / fit.shape);
}

absl::StatusOr<double> GeneralizedParetoTailThreshold(const GeneralizedParetoFit& fit, double q) {
  SKETCHPS_RETURN_IF_ERROR(CheckTailProbability(q, "GeneralizedParetoTailThreshold"));
  SKETCHPS_RETURN_IF_ERROR(CheckScale(fit.scale, "GeneralizedParetoTailThreshold"));
  if (!std::isfinite(fit.shape)) {
    return absl::InvalidArgumentError(absl::StrCat("GeneralizedParetoTailThreshold: shape = ", fit.shape));
  }
  const double log_q = std::log(q);
  if (std::fabs(fit.shape) < kExponentialShape) return -fit.scale * log_q;
  return fit.scale * std::expm1(-fit.shape * log_q) / fit.shape;
}

// ---- Gamma ----------------------------------------------------------------------------------------

absl::StatusOr<double> GammaShapeApproximation(double s) {
  if (!(std::isfinite(s) && s > 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GammaShapeApproximation: s = ln(mean) - mean(ln y) = ", s, " is not finite and positive"));
  }
  return (3.0 - s + std::sqrt((s - 3.0) * (s - 3.0) + 24.0 * s)) / (12.0 * s);
}

absl::StatusOr<GammaFit> FitGamma(const SampleMoments& m, int newton_steps) {
  SKETCHPS_RETURN_IF_ERROR(CheckMoments(m, 1, "FitGamma"));
  if (newton_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("FitGamma: newton_steps = ", newton_steps, " is negative"));
  }
  if (!std::isfinite(m.sum_log)) {
    return absl::InvalidArgumentError(absl::StrCat("FitGamma: moments.sum_log = ", m.sum_log,
                                                   " (needs the log moment of a sample with every value > 0)"));
  }
  const double mean = m.Mean();
  const double s = std::log(mean) - m.sum_log / static_cast<double>(m.count);
  if (!(s > kMinGammaLogGap)) {
    return absl::InvalidArgumentError(absl::StrCat("FitGamma: s = ln(mean) - mean(ln y) = ", s,
                                                   " (the samples are all equal or nearly so; shape unbounded)"));
  }
  SKETCHPS_ASSIGN_OR_RETURN(double alpha, GammaShapeApproximation(s));
  // Newton on f(α) = ln α - ψ(α) - s, f'(α) = 1/α - ψ'(α) < 0; f is convex and decreasing, and the
  // approximation starts within ~1.5% of the root, so the iteration stays positive and converges fast.
  for (int i = 0; i < newton_steps; ++i) {
    const double f = std::log(alpha) - boost::math::digamma(alpha) - s;
    const double df = 1.0 / alpha - boost::math::trigamma(alpha);
    const double next = alpha - f / df;
    if (!(std::isfinite(next) && next > 0.0)) break;
    alpha = next;
  }
  return GammaFit{alpha, mean / alpha};
}

double GammaTail(const GammaFit& fit, double t) {
  if (t <= 0.0) return 1.0;
  try {
    return boost::math::gamma_q(fit.shape, t / fit.scale);
  } catch (const std::exception&) {
    return std::numeric_limits<double>::quiet_NaN();  // invalid parameters (documented in the header)
  }
}

absl::StatusOr<double> GammaTailThreshold(const GammaFit& fit, double q) {
  SKETCHPS_RETURN_IF_ERROR(CheckTailProbability(q, "GammaTailThreshold"));
  SKETCHPS_RETURN_IF_ERROR(CheckScale(fit.scale, "GammaTailThreshold"));
  if (!(std::isfinite(fit.shape) && fit.shape > 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat("GammaTailThreshold: shape = ", fit.shape, " is not positive"));
  }
  try {
    return fit.scale * boost::math::gamma_q_inv(fit.shape, q);
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("GammaTailThreshold: boost::math::gamma_q_inv(", fit.shape, ", ", q, ") failed: ", e.what()));
  }
}

}  // namespace sketchps
