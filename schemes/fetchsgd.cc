#include "schemes/fetchsgd.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "schemes/scheme_base.h"

namespace sketchps {

SketchSizing FetchSgdConfig::Resolved(bool one_row) const {
  SketchSizing out = *this;
  if (out.rows == 0) out.rows = one_row ? 1 : kAutoRowsBelow;
  if (out.cols_factor == 0) out.cols_factor = kAutoCells / out.rows;
  return out;
}

absl::Status FetchSgdConfig::Validate(const std::string& prefix) const {
  if (!(std::isfinite(cols_factor) && cols_factor >= 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, ".cols_factor: must be a finite number >= 0 (0: auto), got ", cols_factor));
  }
  // The table limit with the most rows auto may choose.
  SKETCHPS_RETURN_IF_ERROR(Resolved(/*one_row=*/false).Validate(prefix));
  if (p2 != 0) return absl::InvalidArgumentError(absl::StrCat(prefix, ".p2: FetchSGD has one phase (p2 = 0)"));
  if (!(std::isfinite(momentum) && momentum >= 0.0 && momentum < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ".momentum: must be in [0, 1), got ", momentum));
  }
  return absl::OkStatus();
}

absl::Status FetchSgdConfig::Read(ConfigReader& section) {
  std::string table_name = table == Table::kF32 ? "f32" : "f16";
  SKETCHPS_RETURN_IF_ERROR(section.GetAll("rows", rows, "cols_factor", cols_factor, "cols", cols, "table", table_name,
                                          "momentum", momentum));
  SKETCHPS_RETURN_IF_ERROR(SetTable(section, table_name));
  return section.FinishAndValidate(*this);
}

namespace {

class FetchSgdScheme final : public SchemeBase {
 public:
  FetchSgdScheme(SchemeContext ctx, const FetchSgdConfig& config)
      : SchemeBase(ctx),
        sketch_(ctx, config.SizingFor(SketchKeep(ctx.k, ctx.dim), ctx.dim)),
        momentum_(config.momentum) {}

  const char* name() const override { return "fetchsgd"; }
  absl::Status wire_status() const override { return sketch_.wire_status(); }
  // Measured on the default CNN job (docs/methods.md "fetchsgd"): with one row, below k = 0.5% of the range
  // (auto sizing takes 5 rows there), FetchSGD diverged at densities 0.003 and 0.001.
  std::string advisory() const override {
    if (sketch_.hash().rows() != 1 || FetchSgdConfig::OneRowSuits(sketch_.k(), ctx().dim)) return "";
    return absl::StrCat("k = ", sketch_.k(), " is below 0.5% of a range of ", ctx().dim,
                        " entries with one row: FetchSGD diverged there on the CNN at densities 0.003 and 0.001, "
                        "where rows 5 reached 70-78% (docs/methods.md \"fetchsgd\"); leave scheme.fetchsgd.rows "
                        "and cols_factor at 0 (auto: 5 rows here) or raise scheme.density");
  }
  // Momentum lives in the reducer's momentum sketch: the optimizer runs with momentum 0.
  bool uses_global_momentum() const override { return false; }
  bool reduction_state() const override { return true; }
  // Stateless workers: nothing to save, nothing to restore.
  SchemeState SaveState() const override { return {}; }
  absl::Status RestoreState(const SchemeState&) override { return absl::OkStatus(); }

 protected:
  // The compression input is the gradient itself (no residual, no momentum on the worker).
  absl::StatusOr<const float*> Accumulate(const RoundInfo&, const float* d_grad) override {
    SKETCHPS_RETURN_IF_ERROR(sketch_.status());
    grad_ = d_grad;
    return d_grad;
  }
  std::uint32_t CompressedPhases() const override { return 1; }
  PhaseSpec Spec(std::uint32_t) const override {
    PhaseSpec spec{Reduction::kSketchMomentumError, sketch_.k()};
    spec.momentum = momentum_;
    return spec;
  }
  absl::StatusOr<PayloadValue> Payload(std::uint32_t phase, const PhaseResults& earlier) override {
    return sketch_.Payload(phase, earlier, grad_, exec());
  }
  absl::Status Update(const Aggregate& g, const PhaseResults&) override {
    const auto* sparse = std::get_if<SparseVector>(&g);
    if (sparse == nullptr) return absl::InvalidArgumentError("fetchsgd: a compressed round's aggregate is dense");
    set_selected(sparse->idx.size());
    return absl::OkStatus();
  }
  void OnDenseSent() override {}

 private:
  SketchExchange sketch_;  // phase 0's payload (the table of g), sizing, hash and seed
  const double momentum_;
  const float* grad_ = nullptr;  // this round's gradient (valid until Finish, scheme.h)
};

}  // namespace

std::unique_ptr<Scheme> MakeFetchSgdScheme(SchemeContext ctx, const FetchSgdConfig& config) {
  return std::make_unique<FetchSgdScheme>(std::move(ctx), config);
}

}  // namespace sketchps
