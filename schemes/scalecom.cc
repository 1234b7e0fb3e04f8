#include "schemes/scalecom.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/sparse.h"
#include "kernels/vector_ops.h"
#include "schemes/error_feedback.h"
#include "schemes/scheme_base.h"

namespace sketchps {

absl::Status ScaleComConfig::Validate(const std::string& prefix) const {
  if (!(beta > 0.0 && beta <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ".beta must be in (0, 1], got ", beta));
  }
  return absl::OkStatus();
}

absl::Status ScaleComConfig::Read(ConfigReader& section) {
  SKETCHPS_RETURN_IF_ERROR(section.Get("beta", beta));
  return section.FinishAndValidate(*this);
}

namespace {

class ScaleComScheme final : public SchemeBase {
 public:
  ScaleComScheme(SchemeContext ctx, const ScaleComConfig& config)
      : SchemeBase(ctx),
        beta_(static_cast<float>(config.beta)),
        m_(ctx.dim),
        p_(ctx.dim),
        sel_(std::min(ctx.k, ctx.dim)) {
    m_.Zero();
  }

  const char* name() const override { return "scalecom"; }
  bool uses_global_momentum() const override { return true; }
  SchemeState SaveState() const override { return {{{"memory", m_.ToHost()}}, {}}; }
  absl::Status RestoreState(const SchemeState& state) override {
    const auto it = state.arrays.find("memory");
    if (it == state.arrays.end()) return absl::InvalidArgumentError("scalecom state: missing array 'memory'");
    if (it->second.size() != m_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("scalecom state: 'memory' has ", it->second.size(), " values, expected ", m_.size()));
    }
    m_.FromHost(it->second);
    return absl::OkStatus();
  }

 protected:
  absl::StatusOr<const float*> Accumulate(const RoundInfo&, const float* d_grad) override {
    SKETCHPS_RETURN_IF_ERROR(kernels::Copy(m_.data(), p_.data(), ctx().dim, exec()));
    SKETCHPS_RETURN_IF_ERROR(kernels::Axpy(1.0f, d_grad, p_.data(), ctx().dim, exec()));
    return static_cast<const float*>(p_.data());
  }
  std::uint32_t CompressedPhases() const override { return 2; }
  PhaseSpec Spec(std::uint32_t phase) const override {
    if (phase == 0) return {Reduction::kLeaderIndexSet, 0, Leader()};
    return {Reduction::kDenseSum, 0, 0, /*at_previous_indices=*/true};
  }
  absl::StatusOr<PayloadValue> Payload(std::uint32_t phase, const PhaseResults& earlier) override {
    if (phase == 0) return LeaderIndices();
    const std::vector<std::uint32_t>* indices = earlier.empty() ? nullptr : ResultIndices(*earlier[0]);
    if (indices == nullptr) return absl::InvalidArgumentError("scalecom: phase 0 result carries no index set");
    // CLT-k(p) = p restricted to the leader's set; p then holds p - CLT-k(p).
    SKETCHPS_RETURN_IF_ERROR(sel_.GatherAt(*indices, p_.data(), ctx().dim, exec()));
    SKETCHPS_RETURN_IF_ERROR(kernels::FillAt(p_.data(), ctx().dim, sel_.idx(), sel_.count(), 0.0f, exec()));
    set_selected(sel_.count());
    return PayloadValue{DenseValues{ToHost(sel_.val(), sel_.count())}};
  }
  absl::Status Update(const Aggregate&, const PhaseResults&) override {
    // m <- (1 - β) m + β (p - CLT-k(p)); β = 1 copies, so it is standard EF bit for bit.
    if (beta_ == 1.0f) return kernels::Copy(p_.data(), m_.data(), ctx().dim, exec());
    SKETCHPS_RETURN_IF_ERROR(kernels::Scale(1.0f - beta_, m_.data(), ctx().dim, exec()));
    return kernels::Axpy(beta_, p_.data(), m_.data(), ctx().dim, exec());
  }
  void OnDenseSent() override { m_.Zero(); }
  const float* residual_data() const override { return m_.data(); }

 private:
  std::uint32_t Leader() const {
    return static_cast<std::uint32_t>(round().round % std::max<std::uint32_t>(ctx().num_workers, 1));
  }
  absl::StatusOr<PayloadValue> LeaderIndices() {
    IndexSet set{ctx().dim, {}};
    if (ctx().worker_id == Leader()) {
      SKETCHPS_RETURN_IF_ERROR(sel_.SelectTopK(p_.data(), ctx().dim, ctx().k, exec()));
      set.idx = sel_.HostIndices();
    }
    return PayloadValue{std::move(set)};
  }

  const float beta_;
  kernels::DeviceArray<float> m_;  // memory
  kernels::DeviceArray<float> p_;  // this round's p = m + g, then p - CLT-k(p)
  Selection sel_;
};

}  // namespace

std::unique_ptr<Scheme> MakeScaleComScheme(SchemeContext ctx, const ScaleComConfig& config) {
  return std::make_unique<ScaleComScheme>(std::move(ctx), config);
}

}  // namespace sketchps
