#include "schemes/sdagc.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/index_ops.h"
#include "kernels/sdagc.h"
#include "kernels/select.h"
#include "kernels/sparse.h"
#include "schemes/local_momentum_scheme.h"

namespace sketchps {
namespace {

absl::Status RangeError(const std::string& key, double value, const char* requirement) {
  return absl::InvalidArgumentError(absl::StrCat(key, " must be ", requirement, ", got ", value));
}

bool FiniteAtLeast(double v, double lo) { return std::isfinite(v) && v >= lo; }

// target_density 0 follows the job's density (ctx.k / ctx.dim).
kernels::SdagcControllerOptions ControllerOptions(const SdagcConfig& c, const SchemeContext& ctx) {
  const double job_density = static_cast<double>(ctx.k) / static_cast<double>(std::max<std::uint64_t>(ctx.dim, 1));
  return {c.target_density > 0 ? c.target_density : std::clamp(job_density, 1e-9, 0.999), c.gain, c.min_lambda,
          c.max_lambda};
}

class SdagcScheme final : public LocalMomentumScheme {
 public:
  // sel_ has capacity dim: a threshold may select the whole range.
  SdagcScheme(SchemeContext ctx, const SdagcConfig& config, absl::StatusOr<std::vector<kernels::Segment>> segments)
      : LocalMomentumScheme(ctx, segments.status(), segments.ok() ? *segments : std::vector<kernels::Segment>{},
                            config.momentum, ctx.dim),
        config_(config),
        segments_(segments.ok() ? *std::move(segments) : std::vector<kernels::Segment>{}),
        warmup_rounds_(config.warmup.Rounds(ctx.clock)) {
    if (!config.closed_loop || !init_.ok()) return;
    auto controller = kernels::SdagcLambdaController::Create(ControllerOptions(config, ctx), config.lambda_final);
    if (controller.ok()) {
      controller_ = *controller;
    } else {
      init_ = controller.status();
    }
  }

  const char* name() const override { return "sdagc"; }
  SchemeState SaveState() const override {
    SchemeState state = LocalMomentumScheme::SaveState();
    if (controller_) state.scalars["lambda"] = controller_->lambda();
    return state;
  }
  absl::Status RestoreState(const SchemeState& state) override;

 protected:
  absl::Status Update(const Aggregate&, const PhaseResults&) override {
    SKETCHPS_RETURN_IF_ERROR(lm_.Take(sel_.idx(), sel_.count(), /*mask_momentum=*/true, exec()));
    if (!ClosedLoopActive()) return absl::OkStatus();
    return controller_->Record(sel_.count(), ctx().dim);
  }

 private:
  double t() const { return static_cast<double>(round().round); }
  bool ClosedLoopActive() const { return controller_.has_value() && t() >= warmup_rounds_; }

  double Lambda() const {
    if (ClosedLoopActive()) return controller_->lambda();
    return kernels::SdagcLambda({config_.lambda_initial, config_.lambda_final, warmup_rounds_}, t());
  }

  // sel_ = every |v_i| > τ_l, layer by layer (so indices increase).
  absl::Status Select() override {
    const double lambda = Lambda();
    const float* v = lm_.velocity();
    std::vector<float> tau(segments_.size(), 0.0f);
    if (lambda > 0.0) {
      SKETCHPS_ASSIGN_OR_RETURN(tau, kernels::SdagcThresholds(v, ctx().dim, segments_, lambda, exec()));
    }
    std::uint64_t pos = 0;
    for (std::size_t l = 0; l < segments_.size(); ++l) {
      const auto [offset, n] = segments_[l];
      SKETCHPS_ASSIGN_OR_RETURN(std::size_t count,
                                kernels::ThresholdSelect(v + offset, n, tau[l], sel_.capacity() - pos, sel_.idx() + pos,
                                                         sel_.val() + pos, exec()));
      if (count < config_.min_per_layer) {
        SKETCHPS_ASSIGN_OR_RETURN(count, TopNonzero(v + offset, n, config_.min_per_layer, pos));
      }
      SKETCHPS_RETURN_IF_ERROR(
          kernels::OffsetIndices(sel_.idx() + pos, count, static_cast<std::uint32_t>(offset), exec()));
      pos += count;
    }
    sel_.set_count(pos);
    set_selected(pos);
    return absl::OkStatus();
  }

  // The min(k, n) largest |x| of a layer that are nonzero, index-sorted, written to sel_ at pos: a
  // superset of a threshold selection of fewer than k entries.
  absl::StatusOr<std::size_t> TopNonzero(const float* d_x, std::size_t n, std::size_t k, std::uint64_t pos) {
    std::uint32_t* idx = sel_.idx() + pos;
    float* val = sel_.val() + pos;
    SKETCHPS_ASSIGN_OR_RETURN(std::size_t count, kernels::TopK(d_x, n, k, idx, val, exec()));
    const std::vector<float> host = ToHost(val, count);  // rank order: zeros come last
    while (count > 0 && host[count - 1] == 0.0f) --count;
    SKETCHPS_RETURN_IF_ERROR(kernels::SortByIndex(idx, val, count, exec()));
    return count;
  }

  const SdagcConfig config_;
  const std::vector<kernels::Segment> segments_;
  const double warmup_rounds_;  // config.warmup resolved against the job
  std::optional<kernels::SdagcLambdaController> controller_;
};

absl::Status SdagcScheme::RestoreState(const SchemeState& state) {
  std::optional<kernels::SdagcLambdaController> controller = controller_;
  if (controller) {
    const auto it = state.scalars.find("lambda");
    if (it == state.scalars.end()) return absl::InvalidArgumentError("sdagc: missing scalar 'lambda'");
    if (auto st = controller->SetLambda(it->second); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("sdagc: scalar 'lambda': ", st.message()));
    }
  }
  SKETCHPS_RETURN_IF_ERROR(lm_.Restore(state));
  controller_ = controller;
  return absl::OkStatus();
}

}  // namespace

absl::Status SdagcConfig::Validate(const std::string& prefix) const {
  SKETCHPS_RETURN_IF_ERROR(momentum.Validate(prefix));
  if (!FiniteAtLeast(lambda_initial, 0.0))
    return RangeError(prefix + ".lambda_initial", lambda_initial, "finite and >= 0");
  if (!FiniteAtLeast(lambda_final, 0.0)) return RangeError(prefix + ".lambda_final", lambda_final, "finite and >= 0");
  if (!(target_density >= 0.0 && target_density < 1.0)) {
    return RangeError(prefix + ".target_density", target_density, "in [0, 1) (0: scheme.density)");
  }
  if (!(gain > 0.0 && gain <= 2.0)) return RangeError(prefix + ".gain", gain, "in (0, 2]");
  if (!(FiniteAtLeast(min_lambda, 0.0) && min_lambda > 0.0)) {
    return RangeError(prefix + ".min_lambda", min_lambda, "finite and > 0");
  }
  if (!FiniteAtLeast(max_lambda, min_lambda)) return RangeError(prefix + ".max_lambda", max_lambda, ">= min_lambda");
  if (closed_loop && !(lambda_final >= min_lambda && lambda_final <= max_lambda)) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ".lambda_final must be in [min_lambda, max_lambda] = [",
                                                   min_lambda, ", ", max_lambda, "] with closed_loop, got ",
                                                   lambda_final));
  }
  return absl::OkStatus();
}

absl::Status SdagcConfig::Read(ConfigReader& section) {
  SKETCHPS_RETURN_IF_ERROR(momentum.Read(section));
  SKETCHPS_RETURN_IF_ERROR(section.GetAll("lambda_initial", lambda_initial, "lambda_final", lambda_final, "closed_loop",
                                          closed_loop, "target_density", target_density, "gain", gain, "min_lambda",
                                          min_lambda, "max_lambda", max_lambda, "min_per_layer", min_per_layer));
  SKETCHPS_RETURN_IF_ERROR(
      ReadSpanOrLegacy(section, "warmup", "warmup_epochs", JobSpan::Unit::kEpochs, warmup).status());
  return section.FinishAndValidate(*this);
}

std::unique_ptr<Scheme> MakeSdagcScheme(SchemeContext ctx, const SdagcConfig& config) {
  auto segments = LayerSegments(ctx.layers, ctx.dim);
  return std::make_unique<SdagcScheme>(std::move(ctx), config, std::move(segments));
}

}  // namespace sketchps
