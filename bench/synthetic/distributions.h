// Seeded synthetic samples for the estimator tests and the SIDCo table (bench/sidco_table): SIDCo,
// SDAGC and distribution fits, plus naive host references. Deliberately simple: std::mt19937_64 and
// the <random> distributions, or inverse CDFs where <random> has none.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace sketchps::synthetic {

// The synthetic "gradient" shapes the SIDCo tests use .
enum class Shape { kLaplace, kGaussian, kStudentT3 };

inline const char* ShapeName(Shape s) {
  switch (s) {
    case Shape::kLaplace: return "Laplace";
    case Shape::kGaussian: return "Gaussian";
    case Shape::kStudentT3: return "Student-t3";
  }
  return "?";
}

// Signed samples of the given shape with unit scale (Laplace b = 1, N(0, 1), t with 3 dof).
inline std::vector<float> SignedSamples(Shape shape, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> x(n);
  std::exponential_distribution<double> exp1(1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::student_t_distribution<double> t3(3.0);
  std::bernoulli_distribution coin(0.5);
  for (auto& v : x) {
    switch (shape) {
      case Shape::kLaplace: v = static_cast<float>(coin(rng) ? exp1(rng) : -exp1(rng)); break;
      case Shape::kGaussian: v = static_cast<float>(normal(rng)); break;
      case Shape::kStudentT3: v = static_cast<float>(t3(rng)); break;
    }
  }
  return x;
}

// Exponential samples with mean `scale`.
inline std::vector<float> ExponentialSamples(std::size_t n, double scale, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> d(1.0 / scale);
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>(d(rng));
  return x;
}

// Generalized Pareto (location 0) by inversion: y = σ (U^-ξ - 1) / ξ.
inline std::vector<float> GeneralizedParetoSamples(std::size_t n, double shape, double scale, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<float> x(n);
  for (auto& v : x) {
    const double uu = 1.0 - u(rng);  // (0, 1]
    v = static_cast<float>(shape == 0.0 ? -scale * std::log(uu) : scale * std::expm1(-shape * std::log(uu)) / shape);
  }
  return x;
}

// Gamma(shape, scale) samples; zeros (float underflow for tiny shapes) are replaced by the smallest
// normal float so that every sample has a finite log.
inline std::vector<float> GammaSamples(std::size_t n, double shape, double scale, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::gamma_distribution<double> d(shape, scale);
  std::vector<float> x(n);
  for (auto& v : x) v = std::max(static_cast<float>(d(rng)), 1.17549435e-38f);
  return x;
}

// Number of entries with |x| > tau (float comparison, as the selection kernels do).
inline std::size_t NaiveCountAbove(const std::vector<float>& x, float tau) {
  return static_cast<std::size_t>(std::count_if(x.begin(), x.end(), [&](float v) { return std::fabs(v) > tau; }));
}

}  // namespace sketchps::synthetic
