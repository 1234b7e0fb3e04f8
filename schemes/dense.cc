#include "schemes/dense.h"

#include "schemes/scheme_base.h"

namespace sketchps {
namespace {

class DenseScheme final : public SchemeBase {
 public:
  explicit DenseScheme(SchemeContext ctx) : SchemeBase(std::move(ctx)) {}

  const char* name() const override { return "dense"; }
  bool uses_global_momentum() const override { return true; }
  SchemeState SaveState() const override { return {}; }
  absl::Status RestoreState(const SchemeState&) override { return absl::OkStatus(); }

 protected:
  absl::StatusOr<const float*> Accumulate(const RoundInfo&, const float* d_grad) override {
    grad_ = d_grad;
    set_selected(ctx().dim);
    return d_grad;
  }
  std::uint32_t CompressedPhases() const override { return 1; }
  PhaseSpec Spec(std::uint32_t) const override { return {Reduction::kDenseSum}; }
  absl::StatusOr<PayloadValue> Payload(std::uint32_t, const PhaseResults&) override {
    return DenseValues{ToHost(grad_, ctx().dim)};
  }
  absl::Status Update(const Aggregate&, const PhaseResults&) override { return absl::OkStatus(); }
  void OnDenseSent() override {}

 private:
  const float* grad_ = nullptr;
};

}  // namespace

std::unique_ptr<Scheme> MakeDenseScheme(SchemeContext ctx) { return std::make_unique<DenseScheme>(std::move(ctx)); }

}  // namespace sketchps
