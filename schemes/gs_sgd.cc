#include "schemes/gs_sgd.h"

#include <utility>

#include "common/status.h"
#include "kernels/vector_ops.h"
#include "schemes/scheme_base.h"

namespace sketchps {

absl::Status GsSgdConfig::Read(ConfigReader& section) {
  SKETCHPS_RETURN_IF_ERROR(ReadFields(section));
  return section.FinishAndValidate(*this);
}

namespace {

class GsSgdScheme final : public SchemeBase {
 public:
  GsSgdScheme(SchemeContext ctx, const GsSgdConfig& config) : SchemeBase(ctx), sketch_(ctx, config), e_(ctx.dim) {
    e_.Zero();
  }

  const char* name() const override { return "gs_sgd"; }
  absl::Status wire_status() const override { return sketch_.wire_status(); }
  std::string advisory() const override { return sketch_.advisory(); }
  bool uses_global_momentum() const override { return true; }
  SchemeState SaveState() const override {
    SchemeState state{{{"residual", e_.ToHost()}}, {}};
    sketch_.SaveFloor(state);
    return state;
  }
  absl::Status RestoreState(const SchemeState& state) override {
    SKETCHPS_RETURN_IF_ERROR(sketch_.RestoreFloor(state, name()));
    return RestoreArray(state, name(), "residual", e_);
  }

 protected:
  // a = e + g, in place in e.
  absl::StatusOr<const float*> Accumulate(const RoundInfo&, const float* d_grad) override {
    SKETCHPS_RETURN_IF_ERROR(sketch_.status());
    SKETCHPS_RETURN_IF_ERROR(kernels::Axpy(1.0f, d_grad, e_.data(), e_.size(), exec()));
    return static_cast<const float*>(e_.data());
  }
  std::uint32_t CompressedPhases() const override { return sketch_.phases(); }
  PhaseSpec Spec(std::uint32_t phase) const override { return sketch_.Spec(phase); }
  absl::StatusOr<PayloadValue> Payload(std::uint32_t phase, const PhaseResults& earlier) override {
    return sketch_.Payload(phase, earlier, e_.data(), exec());
  }
  // e = a with G_t's entries zeroed.
  absl::Status Update(const Aggregate& g, const PhaseResults&) override {
    SKETCHPS_ASSIGN_OR_RETURN(const std::uint64_t taken, sketch_.LoadTaken(g));
    set_selected(taken);
    return sketch_.ZeroTaken(e_.data(), exec());
  }
  void OnAggregate(const Aggregate& g) override {
    if (sketch_.Observe(g, round().round, name(), ctx().worker_id, ctx().shard_id)) {
      NoteFloorNotHeld(sketch_.floor().last_growth());
    }
  }
  void OnDenseSent() override { e_.Zero(); }
  const float* residual_data() const override { return e_.data(); }

 private:
  SketchExchange sketch_;
  kernels::DeviceArray<float> e_;  // the residual; holds a = e + g during a round
};

}  // namespace

std::unique_ptr<Scheme> MakeGsSgdScheme(SchemeContext ctx, const GsSgdConfig& config) {
  return std::make_unique<GsSgdScheme>(std::move(ctx), config);
}

}  // namespace sketchps
