#include "schemes/topk_ef.h"

#include "common/status.h"
#include "schemes/error_feedback.h"
#include "schemes/scheme_base.h"

namespace sketchps {
namespace {

class TopKEfScheme final : public SchemeBase {
 public:
  explicit TopKEfScheme(SchemeContext ctx) : SchemeBase(ctx), ef_(ctx.dim), sel_(std::min(ctx.k, ctx.dim)) {}

  const char* name() const override { return "topk"; }
  bool uses_global_momentum() const override { return true; }
  SchemeState SaveState() const override { return {{{"residual", ef_.ToHost()}}, {}}; }
  absl::Status RestoreState(const SchemeState& state) override { return ef_.FromHost(state.arrays.at("residual")); }

 protected:
  absl::StatusOr<const float*> Accumulate(const RoundInfo&, const float* d_grad) override {
    return ef_.Accumulate(d_grad, exec());
  }
  std::uint32_t CompressedPhases() const override { return 1; }
  PhaseSpec Spec(std::uint32_t) const override { return {Reduction::kSparseSum}; }
  absl::StatusOr<PayloadValue> Payload(std::uint32_t, const PhaseResults&) override {
    SKETCHPS_RETURN_IF_ERROR(sel_.SelectTopK(ef_.data(), ctx().dim, ctx().k, exec()));
    SKETCHPS_RETURN_IF_ERROR(ef_.Take(sel_, exec()));
    set_selected(sel_.count());
    return sel_.ToSparse(ctx().dim);
  }
  absl::Status Update(const Aggregate&, const PhaseResults&) override { return absl::OkStatus(); }
  void OnDenseSent() override { ef_.Reset(); }
  const float* residual_data() const override { return ef_.data(); }

 private:
  ErrorFeedback ef_;
  Selection sel_;
};

}  // namespace

std::unique_ptr<Scheme> MakeTopKEfScheme(SchemeContext ctx) { return std::make_unique<TopKEfScheme>(std::move(ctx)); }

}  // namespace sketchps
