// Optimizer step kernels: the replicated SGD update every replica (workers and the server's master
// copy) applies to the same aggregate, so replicas stay bitwise identical. Elementwise and
// order-free: the result does not depend on the backend's thread count.
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

}  // namespace sketchps::kernels
