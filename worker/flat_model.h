// FlatModel: a libtorch module whose parameters and gradients live in two flat float32 buffers.
//
// Contract:
// - Create() copies every parameter of the module (named_parameters(), recursive, in registration
//   order) into ONE contiguous float32 buffer of length dim() and re-points the parameter at its
//   slice, so parameter i is the view params()[offset_i, offset_i + numel_i) reshaped to its shape.
//   The same is done for gradients: each parameter's .grad is set, before any backward, to a view
//   into ONE zeroed flat gradient buffer. "Flattening" therefore costs nothing.
// - Writes through params() are what the next forward sees (we update weights ourselves; there is
//   no torch optimizer). Do not write while an autograd graph built from the old values is alive.
// - backward() accumulates into grads() (libtorch adds in place into an existing dense .grad when no
//   higher-order graph is requested). ZeroGrad() zeroes the buffer and keeps the views.
//   Never call Module::zero_grad(true) or an optimizer's zero_grad(): setting .grad to None would
//   detach it from the buffer (VerifyViews() reports that).
// - layers() lists (name, offset, numel, shape) in flat order; offsets are consecutive from 0.
// - Rejected modules (InvalidArgument, naming the parameter or buffer): no parameters, a parameter
//   that is not a dense CPU float32 tensor, one with requires_grad == false, a parameter registered
//   twice, or any buffer (e.g. BatchNorm running statistics: state outside the flat vector that
//   replicas would not share), and dim() >= 2^32.
// - The Python package keeps the same contract with the same steps written in Python
//   (python/sketchps/_flat.py): its C++ core only receives the two buffers' addresses.
// - FlatModel keeps the module alive (shared ownership); it is move-only and not thread-safe.
//
// This header includes no torch header; the tensor accessors return at::Tensor handles sharing the
// buffers (include <ATen/core/Tensor.h> or torch/torch.h where you call them).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/layout.h"

namespace at {
class Tensor;
}  // namespace at
namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace sketchps::worker {

class FlatModel {
 public:
  // Flattens `module` in place (its parameters become views into the new buffers; values are kept).
  static absl::StatusOr<FlatModel> Create(std::shared_ptr<torch::nn::Module> module);

  FlatModel(FlatModel&&) noexcept;
  FlatModel& operator=(FlatModel&&) noexcept;
  FlatModel(const FlatModel&) = delete;
  FlatModel& operator=(const FlatModel&) = delete;
  ~FlatModel();

  float* params() { return params_; }
  const float* params() const { return params_; }
  float* grads() { return grads_; }
  const float* grads() const { return grads_; }
  std::uint64_t dim() const { return dim_; }
  const sketchps::LayerTable& layers() const;

  // Zeroes the flat gradient buffer; every .grad stays a view into it.
  void ZeroGrad();

  // Checks that every parameter and every .grad still aliases its slice of the buffers (detects a
  // .grad replaced or set to None, or a parameter re-assigned). FailedPrecondition names the
  // parameter.
  absl::Status VerifyViews() const;

  // 1-D tensors of length dim() sharing the buffers (no copy).
  at::Tensor params_tensor() const;
  at::Tensor grads_tensor() const;
  // The parameters as flattened, in layer order (handles sharing the caller's tensors).
  std::vector<at::Tensor> parameters() const;
  torch::nn::Module& module() const;  // only when has_module() (made by Create)
  bool has_module() const;

 private:
  struct State;
  explicit FlatModel(std::unique_ptr<State> state);
  // Flattens `params` (name, tensor) in this order; `buffers` names the module's buffers (must be none).
  static absl::StatusOr<FlatModel> FromParameters(std::vector<std::pair<std::string, at::Tensor>> params,
                                                  const std::vector<std::string>& buffers);

  std::unique_ptr<State> state_;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  std::uint64_t dim_ = 0;
};

}  // namespace sketchps::worker
