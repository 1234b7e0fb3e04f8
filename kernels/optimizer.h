// Optimizer step kernels: the replicated SGD and Adam(W) updates every replica (workers and the
// server's master copy) applies to the same aggregate, so replicas stay bitwise identical.
// Elementwise and order-free: the result does not depend on the backend's thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/backend.h"

namespace sketchps::kernels {

struct SgdStepParams {
  float lr = 0.1f;
  float momentum = 0.0f;      // 0 disables the velocity buffer
  float weight_decay = 0.0f;  // L2 term added to the gradient: g + wd * w
  bool nesterov = false;
};

// For each i < n, with g' = g[i] + wd * w[i]:
//   momentum == 0:  w[i] -= lr * g'
//   else:           v[i] = m * v[i] + g';  w[i] -= lr * (nesterov ? g' + m * v[i] : v[i])
// d_v may be null when momentum == 0. InvalidArgument for null pointers or momentum without d_v.
absl::Status SgdDenseStep(float* d_w, float* d_v, const float* d_g, std::size_t n, const SgdStepParams& p,
                          const Exec& exec);

// w[idx[i]] -= lr * val[i] for a sparse aggregate with unique indices; only valid without momentum
// and weight decay (those touch every entry). InvalidArgument when an index is >= n.
absl::Status SgdSparseStep(float* d_w, std::size_t n, const std::uint32_t* d_idx, const float* d_val, std::size_t count,
                           float lr, const Exec& exec);

// The scalars of one Adam(W) step. Build them with MakeAdamStep: like torch, it computes them in
// double precision and the kernel uses their float values.
struct AdamStepParams {
  float beta1 = 0.9f, one_minus_beta1 = 0.1f;  // beta1 0: m = g (a scheme that keeps its own first moment)
  float beta2 = 0.999f, one_minus_beta2 = 0.001f;
  float eps = 1e-8f;
  float step_size = 1e-3f;             // lr / (1 - beta1^t)
  float bias_correction2_sqrt = 1.0f;  // sqrt(1 - beta2^t)
  float l2 = 0.0f;                     // Adam: wd, added to the gradient as wd * w
  float decay_factor = 1.0f;           // AdamW: 1 - lr * wd, multiplying w first
  bool update_variance = true;         // false: v is held (frozen after a warm-up, as 1-bit Adam does)
};

// The scalars of step t (1-based) of Adam (decoupled false) or AdamW (decoupled true).
AdamStepParams MakeAdamStep(double lr, double beta1, double beta2, double eps, double weight_decay, bool decoupled,
                            std::uint64_t t, bool update_variance);

// torch.optim.Adam / AdamW (amsgrad off, maximize off, the single-tensor form, its operation order),
// for each i < n:
//   w[i] *= decay_factor;  g' = g[i] + l2 * w[i]
//   m[i] = m[i] * beta1 + g' * (1 - beta1)
//   v[i] = v[i] * beta2 + (1 - beta2) * g' * g'        (when update_variance)
//   w[i] += (-step_size * m[i]) / (sqrt(v[i]) / bias_correction2_sqrt + eps)
// InvalidArgument for null pointers (n > 0).
absl::Status AdamDenseStep(float* d_w, float* d_m, float* d_v, const float* d_g, std::size_t n, const AdamStepParams& p,
                           const Exec& exec);

}  // namespace sketchps::kernels
