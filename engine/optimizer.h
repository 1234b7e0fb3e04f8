// The replicated optimizer: SGD with momentum or Nesterov, weight decay and a learning-rate
// schedule (linear warm-up, then constant, step or cosine), applied to a round's aggregate G_t.
//
// Every replica (each worker, and the server's master copy of its shard) owns one Optimizer per
// range and applies the same aggregates in the same order, so all copies stay bitwise identical.
// Schemes with local momentum correction (DGC, Sketched-SGD, SDAGC) run it with momentum 0.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/backend.h"
#include "engine/phase.h"

namespace sketchps {

struct LrSchedule {
  enum class Kind { kConstant, kStep, kCosine };
  Kind kind = Kind::kConstant;
  double base_lr = 0.1;
  double warmup_epochs = 0.0;  // linear ramp from warmup_start_factor * base_lr to base_lr
  double warmup_start_factor = 1.0;
  std::vector<double> milestones;  // kStep: epochs at which lr *= gamma
  double gamma = 0.1;
  double total_epochs = 1.0;  // kCosine: lr reaches min_lr here
  double min_lr = 0.0;
};

// The learning rate at a (fractional) epoch.
double LearningRate(const LrSchedule& schedule, double epoch);

struct OptimizerConfig {
  LrSchedule lr;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;
};

// Checks ranges; messages name the key under `prefix` (e.g. "optimizer.momentum").
absl::Status ValidateOptimizerConfig(const OptimizerConfig& config, const std::string& prefix = "optimizer");

class Optimizer {
 public:
  // `dim` is the range length; `use_momentum` false forces momentum 0 (local-momentum schemes).
  Optimizer(const OptimizerConfig& config, std::uint64_t dim, bool use_momentum);

  // w <- step(w, g) for the range's weights d_w (dim floats, device memory).
  absl::Status Apply(const Aggregate& g, float* d_w, double epoch);

  double momentum() const { return momentum_; }
  std::vector<float> Velocity() const { return velocity_.ToHost(); }
  absl::Status SetVelocity(const std::vector<float>& v);

 private:
  const OptimizerConfig config_;
  const std::uint64_t dim_;
  const double momentum_;
  kernels::Scratch scratch_;
  kernels::Exec exec_;
  kernels::DeviceArray<float> velocity_;  // empty without momentum
  kernels::DeviceArray<float> dense_g_;   // densified sparse aggregate (when the step is dense)
  kernels::DeviceArray<std::uint32_t> idx_;
  kernels::DeviceArray<float> val_;
};

}  // namespace sketchps
