#include "engine/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/overloaded.h"
#include "common/status.h"
#include "kernels/optimizer.h"
#include "kernels/sparse.h"

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

}  // namespace

double LearningRate(const LrSchedule& s, double epoch) {
  const double lr = AfterWarmup(s, epoch);
  if (s.warmup_epochs > 0.0 && epoch < s.warmup_epochs) {
    const double f = s.warmup_start_factor + (1.0 - s.warmup_start_factor) * (epoch / s.warmup_epochs);
    return lr * f;
  }
  return lr;
}

absl::Status ValidateOptimizerConfig(const OptimizerConfig& c, const std::string& prefix) {
  SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".lr", c.lr.base_lr, 0.0, 1e6, false));
  SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".momentum", c.momentum, 0.0, 1.0, true));
  SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".weight_decay", c.weight_decay, 0.0, 1.0, false));
  SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".warmup_epochs", c.lr.warmup_epochs, 0.0, 1e6, false));
  SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".warmup_start_factor", c.lr.warmup_start_factor, 0.0, 1.0, false));
  SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".gamma", c.lr.gamma, 0.0, 1.0, false));
  SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".min_lr", c.lr.min_lr, 0.0, c.lr.base_lr, false));
  if (c.lr.kind == LrSchedule::Kind::kCosine) {
    SKETCHPS_RETURN_IF_ERROR(Range(prefix + ".total_epochs", c.lr.total_epochs, 1e-9, 1e6, false));
  }
  if (c.nesterov && c.momentum == 0.0) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ".nesterov requires ", prefix, ".momentum > 0"));
  }
  return absl::OkStatus();
}

Optimizer::Optimizer(const OptimizerConfig& config, std::uint64_t dim, bool use_momentum)
    : config_(config),
      dim_(dim),
      momentum_(use_momentum ? config.momentum : 0.0),
      exec_{nullptr, &scratch_},
      velocity_(momentum_ > 0.0 ? dim : 0),
      dense_g_(momentum_ > 0.0 || config.weight_decay > 0.0 ? dim : 0) {
  velocity_.Zero();
}

absl::Status Optimizer::Apply(const Aggregate& g, float* d_w, double epoch) {
  kernels::SgdStepParams p;
  p.lr = static_cast<float>(LearningRate(config_.lr, epoch));
  p.momentum = static_cast<float>(momentum_);
  p.weight_decay = static_cast<float>(config_.weight_decay);
  p.nesterov = config_.nesterov && momentum_ > 0.0;
  return std::visit(
      Overloaded{[&](const DenseValues& dense) -> absl::Status {
                   if (dense.values.size() != dim_) {
                     return absl::InvalidArgumentError(
                         absl::StrCat("aggregate has ", dense.values.size(), " values, expected ", dim_));
                   }
                   kernels::DeviceArray<float> d_g(dense.values);
                   return kernels::SgdDenseStep(d_w, velocity_.data(), d_g.data(), dim_, p, exec_);
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
                   const std::size_t count = sparse.idx.size();
                   if (dense_g_.size() == 0)
                     return kernels::SgdSparseStep(d_w, dim_, idx_.data(), val_.data(), count, p.lr, exec_);
                   dense_g_.Zero();
                   SKETCHPS_RETURN_IF_ERROR(
                       kernels::ScatterAdd(idx_.data(), val_.data(), count, dense_g_.data(), dim_, exec_));
                   return kernels::SgdDenseStep(d_w, velocity_.data(), dense_g_.data(), dim_, p, exec_);
                 }},
      g);
}

absl::Status Optimizer::SetVelocity(const std::vector<float>& v) {
  if (v.size() != velocity_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("velocity has ", v.size(), " values, expected ", velocity_.size()));
  }
  velocity_.FromHost(v);
  return absl::OkStatus();
}

}  // namespace sketchps
