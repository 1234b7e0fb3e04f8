#include "schemes/sketched_sgd.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/vector_ops.h"
#include "schemes/scheme_base.h"

namespace sketchps {

absl::Status SketchedSgdConfig::Validate(const std::string& prefix) const {
  SKETCHPS_RETURN_IF_ERROR(SketchSizing::Validate(prefix));
  if (!(momentum >= 0.0 && momentum < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ".momentum: must be in [0, 1), got ", momentum));
  }
  return absl::OkStatus();
}

absl::Status SketchedSgdConfig::Read(ConfigReader& section) {
  SKETCHPS_RETURN_IF_ERROR(ReadFields(section));
  SKETCHPS_RETURN_IF_ERROR(section.Get("momentum", momentum));
  return section.FinishAndValidate(*this);
}

namespace {

class SketchedSgdScheme final : public SchemeBase {
 public:
  SketchedSgdScheme(SchemeContext ctx, const SketchedSgdConfig& config)
      : SchemeBase(ctx),
        sketch_(ctx, config),
        momentum_(static_cast<float>(config.momentum)),
        u_(ctx.dim),
        v_(ctx.dim) {
    u_.Zero();
    v_.Zero();
  }

  const char* name() const override { return "sketched_sgd"; }
  absl::Status wire_status() const override { return sketch_.wire_status(); }
  std::string advisory() const override { return sketch_.advisory(); }
  bool uses_global_momentum() const override { return false; }
  SchemeState SaveState() const override {
    SchemeState state{{{"momentum", u_.ToHost()}, {"accumulator", v_.ToHost()}}, {}};
    sketch_.SaveFloor(state);
    return state;
  }
  absl::Status RestoreState(const SchemeState& state) override {
    SKETCHPS_RETURN_IF_ERROR(sketch_.RestoreFloor(state, name()));
    SKETCHPS_RETURN_IF_ERROR(RestoreArray(state, name(), "momentum", u_));
    return RestoreArray(state, name(), "accumulator", v_);
  }

 protected:
  // u = m u + g; v = v + u. Returns v.
  absl::StatusOr<const float*> Accumulate(const RoundInfo&, const float* d_grad) override {
    SKETCHPS_RETURN_IF_ERROR(sketch_.status());
    SKETCHPS_RETURN_IF_ERROR(kernels::Scale(momentum_, u_.data(), u_.size(), exec()));
    SKETCHPS_RETURN_IF_ERROR(kernels::Axpy(1.0f, d_grad, u_.data(), u_.size(), exec()));
    SKETCHPS_RETURN_IF_ERROR(kernels::Axpy(1.0f, u_.data(), v_.data(), v_.size(), exec()));
    return static_cast<const float*>(v_.data());
  }
  std::uint32_t CompressedPhases() const override { return sketch_.phases(); }
  PhaseSpec Spec(std::uint32_t phase) const override { return sketch_.Spec(phase); }
  absl::StatusOr<PayloadValue> Payload(std::uint32_t phase, const PhaseResults& earlier) override {
    return sketch_.Payload(phase, earlier, v_.data(), exec());
  }
  // Momentum stopping and error reset at G_t's entries.
  absl::Status Update(const Aggregate& g, const PhaseResults&) override {
    SKETCHPS_ASSIGN_OR_RETURN(const std::uint64_t taken, sketch_.LoadTaken(g));
    set_selected(taken);
    SKETCHPS_RETURN_IF_ERROR(sketch_.ZeroTaken(u_.data(), exec()));
    return sketch_.ZeroTaken(v_.data(), exec());
  }
  void OnAggregate(const Aggregate& g) override {
    if (sketch_.Observe(g, round().round, name(), ctx().worker_id, ctx().shard_id)) {
      NoteFloorNotHeld(sketch_.floor().last_growth());
    }
  }
  void OnDenseSent() override { v_.Zero(); }
  const float* residual_data() const override { return v_.data(); }

 private:
  SketchExchange sketch_;
  const float momentum_;
  kernels::DeviceArray<float> u_;  // momentum
  kernels::DeviceArray<float> v_;  // accumulated momentum-corrected updates (error + momentum)
};

}  // namespace

std::unique_ptr<Scheme> MakeSketchedSgdScheme(SchemeContext ctx, const SketchedSgdConfig& config) {
  return std::make_unique<SketchedSgdScheme>(std::move(ctx), config);
}

}  // namespace sketchps
