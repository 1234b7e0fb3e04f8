// The replicated optimizer: SGD (momentum, Nesterov), Adam or AdamW, with weight decay (layers may
// be exempt) and a learning-rate schedule (linear warm-up, then constant, step or cosine), applied
// to a round's aggregate G_t.
//
// Every replica (each worker, and the server's master copy of its shard) owns one Optimizer per
// range and applies the same aggregates in the same order, so all copies stay bitwise identical.
// The state travels with the replica (checkpoints, a rejoining worker, a restarted shard) as one
// array: State() and SetState() (SGD: the velocity; Adam: the first moments, then the second).
//
// Schemes with local momentum correction (DGC, Sketched-SGD, SDAGC) keep the first moment
// themselves: the optimizer then runs with momentum 0 (SGD) or beta1 0 (Adam: m = G_t).
// Adam's step count t is the round's number + 1, so a replica that rolls back or rejoins needs no
// counter of its own. With Adam, `freeze_variance_round` holds the second moment from that round on
// (1-bit Adam's idea: the variance is learned in a dense warm-up, then kept).
// Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/layout.h"
#include "engine/phase.h"
#include "kernels/backend.h"

namespace sketchps {

struct LrSchedule {
  enum class Kind { kConstant, kStep, kCosine };
  Kind kind = Kind::kConstant;
  double base_lr = 0.1;
  double warmup_epochs = 0.0;  // linear ramp from warmup_start_factor * base_lr to base_lr
  double warmup_start_factor = 1.0;
  std::vector<double> milestones;  // kStep: epochs at which lr *= gamma
  double gamma = 0.1;
  double total_epochs = 1.0;  // kCosine: lr reaches min_lr here (the job's length)
  double min_lr = 0.0;
};

// The learning rate at a (fractional) epoch.
double LearningRate(const LrSchedule& schedule, double epoch);

struct OptimizerConfig;
// The size of an Optimizer's State() over `dim` entries (SGD with momentum: dim; Adam: 2 * dim).
std::uint64_t OptimizerStateSize(const OptimizerConfig& config, std::uint64_t dim, bool global_momentum);

// kExternal: the replicas apply no update; Apply writes the aggregate G_t itself into the
// destination (the Python package's DistributedOptimizer then gives it to a torch optimizer as the
// gradient, Horovod-style, docs/pytorch.md). It has no state and no learning rate of its own.
enum class OptimizerKind { kSgd, kAdam, kAdamW, kExternal };
// "sgd", "adam", "adamw", "external".
const char* OptimizerName(OptimizerKind kind);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  LrSchedule lr;
  double momentum = 0.9;  // SGD
  bool nesterov = false;  // SGD
  double beta1 = 0.9;     // Adam, AdamW
  double beta2 = 0.999;
  double eps = 1e-8;
  // SGD and Adam: an L2 term wd * w added to G_t; AdamW: w *= 1 - lr * wd (decoupled).
  double weight_decay = 0.0;
  std::vector<std::string> no_decay;  // layers exempt from weight decay (biases, norms), by name
  // Adam, AdamW: from this round on the second moment is held (unset: never).
  std::optional<std::uint64_t> freeze_variance_round;
};

// Checks ranges; messages name the key under `prefix` (e.g. "optimizer.momentum").
absl::Status ValidateOptimizerConfig(const OptimizerConfig& config, const std::string& prefix = "optimizer");

// Where a round's step stands in the job: Adam's t is round + 1; the schedule follows epoch.
struct StepClock {
  std::uint64_t round = 0;
  double epoch = 0.0;
};

class Optimizer {
 public:
  // `dim` is the range length; `layers` the range's layers (offsets relative to its start) for
  // `no_decay` (empty: every entry decays); `global_momentum` false for a scheme that keeps its own
  // first moment (SGD momentum 0, Adam beta1 0).
  Optimizer(const OptimizerConfig& config, std::uint64_t dim, bool global_momentum, const LayerTable& layers = {});

  // w <- step(w, g) for the range's weights d_w (dim floats, device memory); kExternal: w <- g.
  absl::Status Apply(const Aggregate& g, float* d_w, const StepClock& clock);
  // The same step for a gradient d_g already in device memory (dim floats): nothing crosses to the
  // host, and the result is bitwise Apply's for the same values.
  absl::Status ApplyDense(const float* d_g, float* d_w, const StepClock& clock);

  // The state as one host array (SGD with momentum: dim floats; Adam: 2 * dim; else empty).
  std::vector<float> State() const;
  absl::Status SetState(const std::vector<float>& state);
  std::size_t state_size() const { return state_.size(); }
  // The state in device memory (state_size() floats), and copies of it that stay on the device
  // (n floats: a size other than state_size() is refused as SetState refuses it).
  const float* state_data() const { return state_.data(); }
  absl::Status SetStateFrom(const float* d_state, std::size_t n);
  void ResetState() { state_.Zero(); }
  // SGD's momentum or Adam's beta1 as applied (0 for a scheme with local momentum).
  double momentum() const { return momentum_; }

 private:
  struct Segment {  // a run of entries that all decay, or all do not
    std::uint64_t lo = 0, hi = 0;
    bool decays = true;
  };
  absl::Status Densify(const Aggregate& g, const float** d_g);
  absl::Status WriteAggregate(const Aggregate& g, float* d_w);  // kExternal
  absl::Status StepSgd(const float* d_g, float* d_w, float lr);
  absl::Status StepAdam(const float* d_g, float* d_w, double lr, std::uint64_t round);
  bool adam() const { return config_.kind == OptimizerKind::kAdam || config_.kind == OptimizerKind::kAdamW; }
  absl::Status Step(const float* d_g, float* d_w, const StepClock& clock);
  absl::Status CheckStateSize(std::size_t n) const;

  const OptimizerConfig config_;
  const std::uint64_t dim_;
  const double momentum_;  // SGD momentum, or Adam's beta1; 0 without global momentum
  std::vector<Segment> segments_;
  kernels::Scratch scratch_;
  kernels::Exec exec_;
  kernels::DeviceArray<float> state_;    // SGD: velocity; Adam: m then v
  const bool dense_step_;                // the step reads a dense gradient (else plain SGD: sparse updates)
  kernels::DeviceArray<float> dense_g_;  // the aggregate on the device, when the step is dense
  kernels::DeviceArray<std::uint32_t> idx_;
  kernels::DeviceArray<float> val_;
};

}  // namespace sketchps
