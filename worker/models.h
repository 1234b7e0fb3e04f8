// The models a worker trains, built deterministically from a seed, and the Model facade
// (module + FlatModel + forward/backward) that the trainer uses.
//
// Contract:
// - MakeModel(name, seed) builds "mlp" (784-256-128-10, ReLU), "cnn" (conv3x3 32 -> pool ->
//   conv3x3 64 -> pool -> fc 64 -> fc 10, ~220k parameters) or "resnet" (a GroupNorm ResNet for
//   28x28x1 inputs: stem + 4 basic blocks of width 32/64/128/256, ~1.2M parameters). Any other
//   name is InvalidArgument listing the valid names.
// - Initialization uses only the seed and a portable generator of our own (never libtorch's global
//   RNG), so the same (name, seed) gives bitwise identical weights on every worker and thread.
//   Linear/conv weights and biases ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (libtorch's default
//   scheme); GroupNorm weight 1, bias 0.
// - No model has buffers (no BatchNorm running statistics): all state is in the flat vector.
// - Inputs are float32 [B, 1, 28, 28] (normalized images, see fashion_mnist.h); outputs are logits
//   [B, 10]. Targets are int64 [B] in 0..9. Shape or dtype errors are InvalidArgument, never crashes.
// - Model is move-only and not thread-safe (one per worker thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/flat_model.h"

namespace sketchps::worker {

// "mlp", "cnn", "resnet", "vgg": job/model_layout.h BuiltinModels(), whose layouts they have.
std::vector<std::string> ModelNames();

absl::StatusOr<std::shared_ptr<torch::nn::Module>> MakeModel(const std::string& name, std::uint64_t seed);

// Logits of a module made by MakeModel. InvalidArgument when the module is not one of ours or the
// input is not float32 [B, 1, 28, 28] with B >= 1.
absl::StatusOr<at::Tensor> Forward(torch::nn::Module& module, const at::Tensor& input);

// Mean cross-entropy of logits [B, 10] against int64 targets [B] (a differentiable scalar).
absl::StatusOr<at::Tensor> CrossEntropy(const at::Tensor& logits, const at::Tensor& target);

class Model {
 public:
  // MakeModel + FlatModel::Create.
  static absl::StatusOr<Model> Create(const std::string& name, std::uint64_t seed);

  // Logits with autograd recording (wrap in at::NoGradGuard for inference).
  absl::StatusOr<at::Tensor> Forward(const at::Tensor& input);

  // Zeroes grads(), runs forward, mean cross-entropy and backward: afterwards flat().grads() holds
  // d loss / d params for this batch. Returns the loss.
  absl::StatusOr<float> ForwardBackward(const at::Tensor& input, const at::Tensor& target);

  FlatModel& flat() { return flat_; }
  const FlatModel& flat() const { return flat_; }
  torch::nn::Module& module() { return *module_; }
  const std::string& name() const { return name_; }

 private:
  Model(std::string name, std::shared_ptr<torch::nn::Module> module, FlatModel flat);

  std::string name_;
  std::shared_ptr<torch::nn::Module> module_;
  FlatModel flat_;
};

}  // namespace sketchps::worker
