#include "engine/optimizer.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/overloaded.h"
#include "common/status.h"
#include "kernels/optimizer.h"
#include "kernels/sparse.h"
#include "kernels/vector_ops.h"

namespace sketchps {
namespace {

constexpr double kPi = 3.14159265358979323846;

double AfterWarmup(const LrSchedule& s, double epoch) {
  switch (s.kind) {
    case LrSchedule::Kind::kConstant: return s.base_lr;
    case LrSchedule::Kind::kStep: {
      double lr = s.base_lr;
      for (double m : s.milestones) lr *= epoch >= m ? s.gamma : 1.0;
      return lr;
    }
    case LrSchedule::Kind::kCosine: {
      const double t = std::min(1.0, std::max(0.0, epoch / s.total_epochs));
      return s.min_lr + 0.5 * (s.base_lr - s.min_lr) * (1.0 + std::cos(kPi * t));
    }
  }
  return s.base_lr;
}

absl::Status Range(const std::string& key, double v, double lo, double hi, bool hi_open) {
  if (std::isfinite(v) && v >= lo && (hi_open ? v < hi : v <= hi)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(key, " must be in [", lo, ", ", hi, hi_open ? ")" : "]", ", got ", v));
}

absl::Status ValidateSchedule(const LrSchedule& s, const std::string& prefix) {
  SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".lr", s.base_lr, 0.0, 1e6, false));
  SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".warmup_epochs", s.warmup_epochs, 0.0, 1e6, false));
  SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".warmup_start_factor", s.warmup_start_factor, 0.0, 1.0, false));
  SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".gamma", s.gamma, 0.0, 1.0, false));
  SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".min_lr", s.min_lr, 0.0, s.base_lr, false));
  if (s.kind == LrSchedule::Kind::kCosine) {
    SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".total_epochs", s.total_epochs, 1e-9, 1e6, false));
  }
  return absl::OkStatus();
}

// Runs of entries of the range that decay or do not, in order (one run covering all without layers).
std::vector<std::pair<std::uint64_t, std::uint64_t>> NoDecayRuns(const LayerTable& layers,
                                                                 const std::vector<std::string>& names) {
  const std::set<std::string> exempt(names.begin(), names.end());
  std::vector<std::pair<std::uint64_t, std::uint64_t>> runs;
  for (const auto& l : layers.layers) {
    if (!exempt.contains(l.name)) continue;
    if (!runs.empty() && runs.back().second == l.offset) {
      runs.back().second = l.offset + l.numel;
    } else {
      runs.emplace_back(l.offset, l.offset + l.numel);
    }
  }
  return runs;
}

}  // namespace

double LearningRate(const LrSchedule& s, double epoch) {
  const double lr = AfterWarmup(s, epoch);
  if (s.warmup_epochs > 0.0 && epoch < s.warmup_epochs) {
    const double f = s.warmup_start_factor + (1.0 - s.warmup_start_factor) * (epoch / s.warmup_epochs);
    return lr * f;
  }
  return lr;
}

const char* OptimizerName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd: return "sgd";
    case OptimizerKind::kAdam: return "adam";
    case OptimizerKind::kAdamW: return "adamw";
    case OptimizerKind::kExternal: return "external";
  }
  return "sgd";
}

absl::Status ValidateOptimizerConfig(const OptimizerConfig& c, const std::string& prefix) {
  SKETCHPS_RETURN_IF_ERROR(ValidateSchedule(c.lr, prefix));
  SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".weight_decay", c.weight_decay, 0.0, 1.0, false));
  if (c.kind == OptimizerKind::kExternal) {
    if (c.weight_decay != 0.0 || !c.no_decay.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, ".weight_decay / ", prefix,
                                                     ".no_decay: not with name external (the torch optimizer "
                                                     "applies its own weight decay)"));
    }
    return absl::OkStatus();
  }
  if (c.kind == OptimizerKind::kSgd) {
    SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".momentum", c.momentum, 0.0, 1.0, true));
    if (c.nesterov && c.momentum == 0.0) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, ".nesterov requires ", prefix, ".momentum > 0"));
    }
    if (c.freeze_variance_round) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, ".freeze_variance: only for adam and adamw"));
    }
    return absl::OkStatus();
  }
  SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".betas[0]", c.beta1, 0.0, 1.0, true));
  SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".betas[1]", c.beta2, 0.0, 1.0, true));
  SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".eps", c.eps, 0.0, 1.0, false));
  if (c.eps == 0.0) return absl::InvalidArgumentError(absl::StrCat(prefix, ".eps must be > 0, got 0"));
  if (c.nesterov) return absl::InvalidArgumentError(absl::StrCat(prefix, ".nesterov: only for sgd"));
  return absl::OkStatus();
}

std::uint64_t OptimizerStateSize(const OptimizerConfig& config, std::uint64_t dim, bool global_momentum) {
  if (config.kind == OptimizerKind::kExternal) return 0;
  if (config.kind != OptimizerKind::kSgd) return 2 * dim;
  return global_momentum && config.momentum > 0.0 ? dim : 0;
}

Optimizer::Optimizer(const OptimizerConfig& config, std::uint64_t dim, bool global_momentum, const LayerTable& layers)
    : config_(config),
      dim_(dim),
      momentum_(!global_momentum || config.kind == OptimizerKind::kExternal
                    ? 0.0
                    : (config.kind == OptimizerKind::kSgd ? config.momentum : config.beta1)),
      exec_{nullptr, &scratch_},
      state_(OptimizerStateSize(config, dim, global_momentum)),
      dense_step_(adam() || momentum_ > 0.0 || config.weight_decay > 0.0),
      dense_g_(dense_step_ ? dim : 0) {
  state_.Zero();
  // Segments alternate between decaying and exempt runs, covering [0, dim).
  std::uint64_t at = 0;
  for (const auto& [lo, hi] : NoDecayRuns(layers, config.no_decay)) {
    if (lo > at) segments_.push_back({at, lo, true});
    segments_.push_back({lo, std::min(hi, dim), false});
    at = std::min(hi, dim);
  }
  if (at < dim || segments_.empty()) segments_.push_back({at, dim, true});
}

absl::Status Optimizer::Densify(const Aggregate& g, const float** d_g) {
  return std::visit(Overloaded{[&](const DenseValues& dense) -> absl::Status {
                                 if (dense.values.size() != dim_) {
                                   return absl::InvalidArgumentError(
                                       absl::StrCat("aggregate has ", dense.values.size(), " values, expected ", dim_));
                                 }
                                 dense_g_.FromHost(dense.values);
                                 *d_g = dense_g_.data();
                                 return absl::OkStatus();
                               },
                               [&](const SparseVector& sparse) -> absl::Status {
                                 if (sparse.dim != dim_ || sparse.idx.size() != sparse.val.size()) {
                                   return absl::InvalidArgumentError(
                                       absl::StrCat("sparse aggregate over ", sparse.dim, " entries, expected ", dim_));
                                 }
                                 if (idx_.size() < sparse.idx.size()) {
                                   idx_ = kernels::DeviceArray<std::uint32_t>(sparse.idx.size());
                                   val_ = kernels::DeviceArray<float>(sparse.idx.size());
                                 }
                                 idx_.FromHost(sparse.idx);
                                 val_.FromHost(sparse.val);
                                 dense_g_.Zero();
                                 *d_g = dense_g_.data();
                                 return kernels::ScatterAdd(idx_.data(), val_.data(), sparse.idx.size(),
                                                            dense_g_.data(), dim_, exec_);
                               }},
                    g);
}

absl::Status Optimizer::StepSgd(const float* d_g, float* d_w, float lr) {
  kernels::SgdStepParams p;
  p.lr = lr;
  p.momentum = static_cast<float>(momentum_);
  p.nesterov = config_.nesterov && momentum_ > 0.0;
  for (const Segment& s : segments_) {
    p.weight_decay = s.decays ? static_cast<float>(config_.weight_decay) : 0.0f;
    float* v = momentum_ > 0.0 ? state_.data() + s.lo : nullptr;
    SKETCHPS_RETURN_IF_ERROR(kernels::SgdDenseStep(d_w + s.lo, v, d_g + s.lo, s.hi - s.lo, p, exec_));
  }
  return absl::OkStatus();
}

absl::Status Optimizer::StepAdam(const float* d_g, float* d_w, double lr, std::uint64_t round) {
  const bool update_variance = !config_.freeze_variance_round || round < *config_.freeze_variance_round;
  const bool decoupled = config_.kind == OptimizerKind::kAdamW;
  float* m = state_.data();
  float* v = state_.data() + dim_;
  for (const Segment& s : segments_) {
    const double wd = s.decays ? config_.weight_decay : 0.0;
    const auto p =
        kernels::MakeAdamStep(lr, momentum_, config_.beta2, config_.eps, wd, decoupled, round + 1, update_variance);
    SKETCHPS_RETURN_IF_ERROR(kernels::AdamDenseStep(d_w + s.lo, m + s.lo, v + s.lo, d_g + s.lo, s.hi - s.lo, p, exec_));
  }
  return absl::OkStatus();
}

absl::Status Optimizer::Apply(const Aggregate& g, float* d_w, const StepClock& clock) {
  if (config_.kind == OptimizerKind::kExternal) return WriteAggregate(g, d_w);
  // Plain SGD on a sparse aggregate touches only its entries.
  if (const auto* sparse = std::get_if<SparseVector>(&g); sparse != nullptr && !dense_step_) {
    if (sparse->dim != dim_ || sparse->idx.size() != sparse->val.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sparse aggregate over ", sparse->dim, " entries, expected ", dim_));
    }
    if (idx_.size() < sparse->idx.size()) {
      idx_ = kernels::DeviceArray<std::uint32_t>(sparse->idx.size());
      val_ = kernels::DeviceArray<float>(sparse->idx.size());
    }
    idx_.FromHost(sparse->idx);
    val_.FromHost(sparse->val);
    const auto lr = static_cast<float>(LearningRate(config_.lr, clock.epoch));
    return kernels::SgdSparseStep(d_w, dim_, idx_.data(), val_.data(), sparse->idx.size(), lr, exec_);
  }
  if (dense_g_.size() != dim_) dense_g_ = kernels::DeviceArray<float>(dim_);  // plain SGD's first dense round
  const float* d_g = nullptr;
  SKETCHPS_RETURN_IF_ERROR(Densify(g, &d_g));
  return Step(d_g, d_w, clock);
}

absl::Status Optimizer::ApplyDense(const float* d_g, float* d_w, const StepClock& clock) {
  if (config_.kind == OptimizerKind::kExternal) return kernels::Copy(d_g, d_w, dim_, exec_);
  return Step(d_g, d_w, clock);
}

absl::Status Optimizer::Step(const float* d_g, float* d_w, const StepClock& clock) {
  const double lr = LearningRate(config_.lr, clock.epoch);
  return adam() ? StepAdam(d_g, d_w, lr, clock.round) : StepSgd(d_g, d_w, static_cast<float>(lr));
}

absl::Status Optimizer::WriteAggregate(const Aggregate& g, float* d_w) {
  if (const auto* dense = std::get_if<DenseValues>(&g); dense != nullptr) {
    if (dense->values.size() != dim_) {
      return absl::InvalidArgumentError(
          absl::StrCat("aggregate has ", dense->values.size(), " values, expected ", dim_));
    }
    kernels::CopyToDevice(d_w, dense->values.data(), dim_ * sizeof(float));
    return absl::OkStatus();
  }
  const auto& sparse = std::get<SparseVector>(g);
  if (sparse.dim != dim_ || sparse.idx.size() != sparse.val.size()) {
    return absl::InvalidArgumentError(absl::StrCat("sparse aggregate over ", sparse.dim, " entries, expected ", dim_));
  }
  if (idx_.size() < sparse.idx.size()) {
    idx_ = kernels::DeviceArray<std::uint32_t>(sparse.idx.size());
    val_ = kernels::DeviceArray<float>(sparse.idx.size());
  }
  idx_.FromHost(sparse.idx);
  val_.FromHost(sparse.val);
  SKETCHPS_RETURN_IF_ERROR(kernels::Fill(0.0f, d_w, dim_, exec_));
  return kernels::ScatterAdd(idx_.data(), val_.data(), sparse.idx.size(), d_w, dim_, exec_);
}

std::vector<float> Optimizer::State() const { return state_.ToHost(); }

absl::Status Optimizer::CheckStateSize(std::size_t n) const {
  if (n == state_.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("optimizer state has ", n, " values, expected ", state_.size(), " (",
                                                 OptimizerName(config_.kind), " over ", dim_, " entries)"));
}

absl::Status Optimizer::SetState(const std::vector<float>& state) {
  SKETCHPS_RETURN_IF_ERROR(CheckStateSize(state.size()));
  state_.FromHost(state);
  return absl::OkStatus();
}

absl::Status Optimizer::SetStateFrom(const float* d_state, std::size_t n) {
  SKETCHPS_RETURN_IF_ERROR(CheckStateSize(n));
  return kernels::Copy(d_state, state_.data(), n, exec_);
}

}  // namespace sketchps
