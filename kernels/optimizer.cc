#include "kernels/optimizer.h"

#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/reduce.h>

#include "absl/strings/str_cat.h"
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
  if (n == 0) return absl::OkStatus();
  if (d_w == nullptr || d_g == nullptr) return absl::InvalidArgumentError("SgdDenseStep: null weights or gradient");
  if (p.momentum != 0.0f && d_v == nullptr) {
    return absl::InvalidArgumentError("SgdDenseStep: momentum needs a velocity buffer");
  }
  thrust::counting_iterator<std::size_t> first(0);
  thrust::for_each(Policy(exec), first, first + n, DenseSgd{d_w, d_v, d_g, p});
  return absl::OkStatus();
}

absl::Status SgdSparseStep(float* d_w, std::size_t n, const std::uint32_t* d_idx, const float* d_val, std::size_t count,
                           float lr, const Exec& exec) {
  if (count == 0) return absl::OkStatus();
  if (d_w == nullptr || d_idx == nullptr || d_val == nullptr) {
    return absl::InvalidArgumentError("SgdSparseStep: null pointer");
  }
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
