#include "kernels/optimizer.h"

#include <cmath>
#include <utility>

#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/reduce.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/internal/pointer_check.h"
#include "kernels/internal/policy.h"

namespace sketchps::kernels {
namespace {

using internal::Policy;

struct DenseSgd {
  float* w;
  float* v;
  const float* g;
  SgdStepParams p;
  SKETCHPS_HD void operator()(std::size_t i) const {
    const float grad = g[i] + p.weight_decay * w[i];
    if (p.momentum == 0.0f) {
      w[i] -= p.lr * grad;
      return;
    }
    const float vel = p.momentum * v[i] + grad;
    v[i] = vel;
    w[i] -= p.lr * (p.nesterov ? grad + p.momentum * vel : vel);
  }
};

struct DenseAdam {
  float* w;
  float* m;
  float* v;
  const float* g;
  AdamStepParams p;
  SKETCHPS_HD void operator()(std::size_t i) const {
    float wi = w[i];
    if (p.decay_factor != 1.0f) wi *= p.decay_factor;
    const float grad = p.l2 != 0.0f ? g[i] + p.l2 * wi : g[i];
    const float mi = m[i] * p.beta1 + grad * p.one_minus_beta1;
    m[i] = mi;
    float vi = v[i];
    if (p.update_variance) {
      vi = vi * p.beta2 + p.one_minus_beta2 * grad * grad;
      v[i] = vi;
    }
    const float denom = sqrtf(vi) / p.bias_correction2_sqrt + p.eps;
    w[i] = wi + (-p.step_size * mi) / denom;
  }
};

struct SparseSgd {
  float* w;
  const std::uint32_t* idx;
  const float* val;
  float lr;
  SKETCHPS_HD void operator()(std::size_t i) const { w[idx[i]] -= lr * val[i]; }
};

}  // namespace

absl::Status SgdDenseStep(float* d_w, float* d_v, const float* d_g, std::size_t n, const SgdStepParams& p,
                          const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExec("SgdDenseStep", exec));
  if (n == 0) return absl::OkStatus();
  if (d_w == nullptr || d_g == nullptr) return absl::InvalidArgumentError("SgdDenseStep: null weights or gradient");
  if (p.momentum != 0.0f && d_v == nullptr) {
    return absl::InvalidArgumentError("SgdDenseStep: momentum needs a velocity buffer");
  }
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer("SgdDenseStep", "d_w", d_w, n));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer("SgdDenseStep", "d_g", d_g, n));
  if (p.momentum != 0.0f) SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer("SgdDenseStep", "d_v", d_v, n));
  thrust::counting_iterator<std::size_t> first(0);
  thrust::for_each(Policy(exec), first, first + n, DenseSgd{d_w, d_v, d_g, p});
  return absl::OkStatus();
}

AdamStepParams MakeAdamStep(double lr, double beta1, double beta2, double eps, double weight_decay, bool decoupled,
                            std::uint64_t t, bool update_variance) {
  AdamStepParams p;
  const double step = static_cast<double>(t == 0 ? 1 : t);
  p.beta1 = static_cast<float>(beta1);
  p.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  p.beta2 = static_cast<float>(beta2);
  p.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  p.eps = static_cast<float>(eps);
  p.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, step)));
  p.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, step)));
  if (decoupled) {
    p.decay_factor = static_cast<float>(1.0 - lr * weight_decay);
  } else {
    p.l2 = static_cast<float>(weight_decay);
  }
  p.update_variance = update_variance;
  return p;
}

absl::Status AdamDenseStep(float* d_w, float* d_m, float* d_v, const float* d_g, std::size_t n, const AdamStepParams& p,
                           const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExec("AdamDenseStep", exec));
  if (n == 0) return absl::OkStatus();
  if (d_w == nullptr || d_m == nullptr || d_v == nullptr || d_g == nullptr) {
    return absl::InvalidArgumentError("AdamDenseStep: null weights, moments or gradient");
  }
  for (const auto& [name, ptr] :
       {std::pair<const char*, const float*>{"d_w", d_w}, {"d_m", d_m}, {"d_v", d_v}, {"d_g", d_g}}) {
    SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer("AdamDenseStep", name, ptr, n));
  }
  thrust::counting_iterator<std::size_t> first(0);
  thrust::for_each(Policy(exec), first, first + n, DenseAdam{d_w, d_m, d_v, d_g, p});
  return absl::OkStatus();
}

absl::Status SgdSparseStep(float* d_w, std::size_t n, const std::uint32_t* d_idx, const float* d_val, std::size_t count,
                           float lr, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExec("SgdSparseStep", exec));
  if (count == 0) return absl::OkStatus();
  if (d_w == nullptr || d_idx == nullptr || d_val == nullptr) {
    return absl::InvalidArgumentError("SgdSparseStep: null pointer");
  }
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer("SgdSparseStep", "d_w", d_w, n));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer("SgdSparseStep", "d_idx", d_idx, count));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer("SgdSparseStep", "d_val", d_val, count));
  // reduce (not max_element) returns the value to the host on every backend.
  const std::uint32_t max_idx =
      thrust::reduce(Policy(exec), d_idx, d_idx + count, std::uint32_t{0}, thrust::maximum<std::uint32_t>());
  if (max_idx >= n) {
    return absl::InvalidArgumentError(absl::StrCat("SgdSparseStep: index ", max_idx, " >= n = ", n));
  }
  thrust::counting_iterator<std::size_t> first(0);
  thrust::for_each(Policy(exec), first, first + count, SparseSgd{d_w, d_idx, d_val, lr});
  return absl::OkStatus();
}

}  // namespace sketchps::kernels
