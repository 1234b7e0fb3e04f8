// Closed-form fits of sparsity-inducing distributions and their tail thresholds (SIDCo, SDAGC).
//
// Every fit works from the sufficient statistics of a sample of nonnegative values y (SampleMoments:
// count, sum, sum of squares, sum of logs, min, max), which the one-pass kernels in kernels/stats.h
// produce; nothing here touches device memory. Each distribution comes with its tail function
// P(Y > t) and its inverse, the threshold t with P(Y > t) = q ("tail threshold"):
//
//   exponential           scale β = mean (maximum likelihood)          t = -β ln q
//   generalized Pareto    (ξ, σ) by the method of moments, location 0   t = σ (q^-ξ - 1) / ξ   (ξ -> 0: -σ ln q)
//   gamma                 shape α from the closed-form MLE approximation, optionally refined by Newton
//                         steps on ln α - ψ(α) = s; scale β = mean / α   t = β Q^-1(α, q)
//
// The gamma threshold uses the EXACT inverse of the regularized upper incomplete gamma function
// (boost::math::gamma_q_inv), never the closed-form approximation -β (ln q + ln Γ(α)), which is only
// accurate near α = 1 (docs/methods.md, decision 6).
//
// Fits are scale-equivariant: multiplying every sample by c > 0 multiplies the scale parameter (and the
// threshold) by c and leaves the shape unchanged, so callers need not normalise their data.
//
// Failure behaviour: every function validates its input and returns InvalidArgument naming the
// offending argument or field (count == 0, non-finite statistics, q outside (0, 1], a sample too
// degenerate for the fit, e.g. zero variance for the generalized Pareto fit). Nothing aborts.
// Thread-safety: all functions are pure and may be called concurrently.
//
// This header is included by kernels/ code compiled as C++17 (also by nvcc), so it sticks to C++17.
#pragma once

#include <cstdint>
#include <limits>

#include "absl/status/statusor.h"

namespace sketchps {

// Sufficient statistics of a sample y_1..y_count of nonnegative values, accumulated in double.
// A producer may skip the optional moments (sum_sq, sum_log, min/max) and set them to NaN; each fit
// says which it needs and rejects a NaN there.
struct SampleMoments {
  std::uint64_t count = 0;
  double sum = 0.0;                                       // Σ y
  double sum_sq = 0.0;                                    // Σ y² (generalized Pareto)
  double sum_log = 0.0;                                   // Σ ln y (gamma); -inf if some y == 0
  double min = std::numeric_limits<double>::infinity();   // +inf when count == 0
  double max = -std::numeric_limits<double>::infinity();  // -inf when count == 0

  double Mean() const { return count ? sum / static_cast<double>(count) : 0.0; }
  // Population variance Σ(y - mean)² / count, clamped at 0 (computed from the raw sums; the
  // cancellation is harmless while |mean| / stddev stays well below 2^20 for float-valued data).
  double Variance() const;
};

// Moments of the shifted sample y_i - shift (shift may be negative). The sum of logs cannot be
// shifted and becomes NaN unless shift == 0.
SampleMoments ShiftMoments(const SampleMoments& m, double shift);

// ---- Exponential ----------------------------------------------------------------------------------
struct ExponentialFit {
  double scale = 1.0;  // β (the mean)
};
// β = mean (needs count and sum only). Errors: count == 0, non-finite sum, sum <= 0 (an all-zero
// sample has no scale).
absl::StatusOr<ExponentialFit> FitExponential(const SampleMoments& m);
// P(Y > t) = exp(-t / β) for t >= 0 (1 for t < 0).
double ExponentialTail(const ExponentialFit& fit, double t);
// t = -β ln q. Errors: q outside (0, 1], non-positive or non-finite scale.
absl::StatusOr<double> ExponentialTailThreshold(const ExponentialFit& fit, double q);

// ---- Generalized Pareto (location 0) -------------------------------------------------------------
struct GeneralizedParetoFit {
  double shape = 0.0;  // ξ (ξ > 0 heavy tail, ξ = 0 exponential, ξ < 0 bounded support)
  double scale = 1.0;  // σ
};
// Method of moments (needs ξ < 1/2): ρ = mean² / var, σ = mean (ρ + 1) / 2, ξ = (1 - ρ) / 2.
// Errors: count < 2, non-finite sum or sum_sq, mean <= 0, zero variance.
absl::StatusOr<GeneralizedParetoFit> FitGeneralizedPareto(const SampleMoments& m);
// P(Y > t) = (1 + ξ t / σ)^(-1/ξ) (exp(-t/σ) when ξ = 0); 0 beyond the upper end point when ξ < 0.
double GeneralizedParetoTail(const GeneralizedParetoFit& fit, double t);
// t = σ (q^-ξ - 1) / ξ, evaluated as σ expm1(-ξ ln q) / ξ (stable as ξ -> 0; |ξ| < 1e-12 uses -σ ln q).
// Errors: q outside (0, 1], non-positive or non-finite scale, non-finite shape.
absl::StatusOr<double> GeneralizedParetoTailThreshold(const GeneralizedParetoFit& fit, double q);

// ---- Gamma ----------------------------------------------------------------------------------------
struct GammaFit {
  double shape = 1.0;  // α
  double scale = 1.0;  // β
};
// The closed-form approximate MLE of the shape from s = ln(mean) - mean(ln y) > 0 (Minka 2002, as in
// SIDCo): α = (3 - s + sqrt((s - 3)² + 24 s)) / (12 s). Errors: s not finite and positive.
absl::StatusOr<double> GammaShapeApproximation(double s);
// Gamma fit from moments with a finite sum_log (every sample > 0). newton_steps = 0 gives SIDCo's
// closed-form estimate; each further step is a Newton step on the exact MLE equation ln α - ψ(α) = s
// (digamma/trigamma from Boost.Math), which converges in 2-3 steps. β = mean / α.
// Errors: count == 0, mean <= 0, sum_log not finite (NaN: not computed; -inf: a zero sample), s <= 1e-12
// (all samples equal or nearly so), negative newton_steps.
absl::StatusOr<GammaFit> FitGamma(const SampleMoments& m, int newton_steps = 3);
// P(Y > t) = Q(α, t / β), the regularized upper incomplete gamma function; NaN for invalid parameters.
double GammaTail(const GammaFit& fit, double t);
// t = β Q^-1(α, q) with the exact inverse (boost::math::gamma_q_inv). Errors: q outside (0, 1],
// non-positive or non-finite parameters, or a Boost evaluation failure.
absl::StatusOr<double> GammaTailThreshold(const GammaFit& fit, double q);

}  // namespace sketchps
