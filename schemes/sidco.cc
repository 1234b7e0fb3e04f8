#include "schemes/sidco.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status.h"
#include "schemes/error_feedback.h"
#include "schemes/scheme_base.h"

namespace sketchps {
namespace {

using kernels::SidcoStageMode;
using kernels::SidcoVariant;

const std::map<std::string, SidcoVariant>& Variants() {
  static const auto* m =
      new std::map<std::string, SidcoVariant>{{"exponential", SidcoVariant::kExponential},
                                              {"gpareto", SidcoVariant::kGeneralizedPareto},
                                              {"gamma_gpareto", SidcoVariant::kGammaGeneralizedPareto}};
  return *m;
}

const std::map<std::string, SidcoStageMode>& StageModes() {
  static const auto* m = new std::map<std::string, SidcoStageMode>{{"adaptive", SidcoStageMode::kAdaptive},
                                                                   {"fixed", SidcoStageMode::kFixed},
                                                                   {"per_stage_ratio", SidcoStageMode::kPerStageRatio}};
  return *m;
}

// names[value], or `fallback` for an unknown name (Validate reports those).
template <class T>
T Lookup(const std::map<std::string, T>& names, const std::string& value, T fallback) {
  const auto it = names.find(value);
  return it == names.end() ? fallback : it->second;
}

template <class T>
absl::Status CheckName(const std::map<std::string, T>& names, const std::string& value, const std::string& key) {
  if (names.count(value) > 0) return absl::OkStatus();
  std::string known;
  for (const auto& [name, unused] : names) absl::StrAppend(&known, known.empty() ? "" : ", ", name);
  return absl::InvalidArgumentError(absl::StrCat(key, ": unknown value '", value, "' (known: ", known, ")"));
}

}  // namespace

int SidcoConfig::AdaptWindowCalls(const JobClock& clock) const {
  const double rounds = std::round(adapt_window.Rounds(clock));
  return static_cast<int>(std::clamp(rounds, 1.0, 1e6));
}

kernels::SidcoOptions SidcoConfig::ToOptions(double density, const JobClock& clock) const {
  kernels::SidcoOptions o;
  o.variant = Lookup(Variants(), variant, o.variant);
  o.density = density;
  o.first_stage_ratio = first_stage_ratio;
  o.stage_mode = Lookup(StageModes(), stage_mode, o.stage_mode);
  o.stages = stages;
  o.per_stage_ratio = per_stage_ratio;
  o.adapt_window = AdaptWindowCalls(clock);
  o.adapt_tolerance_up = adapt_tolerance_up;
  o.adapt_tolerance_down = adapt_tolerance_down;
  o.adapt_memory = adapt_memory;
  o.gamma_newton_steps = gamma_newton_steps;
  return o;
}

absl::Status SidcoConfig::Validate(const std::string& prefix) const {
  SKETCHPS_RETURN_IF_ERROR(CheckName(Variants(), variant, prefix + ".variant"));
  SKETCHPS_RETURN_IF_ERROR(CheckName(StageModes(), stage_mode, prefix + ".stage_mode"));
  // The estimator's own checks, with its field names (identical to ours) moved under `prefix`. The
  // density is the job's, checked by the registry; any valid value stands in for it here.
  if (adapt_window.IsZero()) return absl::InvalidArgumentError(prefix + ".adapt_window: must be longer than 0");
  const absl::Status st = kernels::ValidateSidcoOptions(ToOptions(0.5));
  if (st.ok()) return st;
  return absl::InvalidArgumentError(absl::StrReplaceAll(st.message(), {{"SidcoOptions.", prefix + "."}}));
}

absl::Status SidcoConfig::Read(ConfigReader& section) {
  SKETCHPS_RETURN_IF_ERROR(section.GetAll("variant", variant, "stage_mode", stage_mode, "stages", stages,
                                          "first_stage_ratio", first_stage_ratio, "per_stage_ratio", per_stage_ratio,
                                          "adapt_window", adapt_window, "adapt_tolerance_up", adapt_tolerance_up,
                                          "adapt_tolerance_down", adapt_tolerance_down, "adapt_memory", adapt_memory,
                                          "gamma_newton_steps", gamma_newton_steps));
  return section.FinishAndValidate(*this);
}

namespace {

constexpr char kPrefix[] = "sidco.";

// The estimator's adaptation state as named scalars (doubles hold every field exactly).
void SaveAdaptState(const kernels::SidcoAdaptState& s, std::map<std::string, double>& out) {
  out[absl::StrCat(kPrefix, "stages")] = s.stages;
  out[absl::StrCat(kPrefix, "direction")] = s.direction;
  out[absl::StrCat(kPrefix, "window_calls")] = s.window_calls;
  out[absl::StrCat(kPrefix, "window_ratio_sum")] = s.window_ratio_sum;
  out[absl::StrCat(kPrefix, "windows")] = static_cast<double>(s.windows);
  out[absl::StrCat(kPrefix, "previous_stages")] = s.previous_stages;
  out[absl::StrCat(kPrefix, "previous_ratio")] = s.previous_ratio;
  for (std::size_t m = 0; m < s.error_by_stages.size(); ++m) {
    out[absl::StrCat(kPrefix, "error_by_stages.", m)] = s.error_by_stages[m];
    out[absl::StrCat(kPrefix, "window_by_stages.", m)] = static_cast<double>(s.window_by_stages[m]);
  }
}

// Reads scalar `name`; InvalidArgument when it is missing or, for integral fields, not an integer.
absl::Status GetScalar(const SchemeState& state, const std::string& name, bool integral, double& out) {
  const auto it = state.scalars.find(kPrefix + name);
  if (it == state.scalars.end()) {
    return absl::InvalidArgumentError(absl::StrCat("sidco state: missing scalar '", kPrefix, name, "'"));
  }
  const double v = it->second;
  if (integral && !(std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 9e15)) {
    return absl::InvalidArgumentError(absl::StrCat("sidco state: '", kPrefix, name, "' = ", v, " is not an integer"));
  }
  out = it->second;
  return absl::OkStatus();
}

// The inverse of SaveAdaptState for an estimator whose records have `records` entries.
absl::StatusOr<kernels::SidcoAdaptState> LoadAdaptState(const SchemeState& state, std::size_t records) {
  kernels::SidcoAdaptState s;
  double v = 0;
  SKETCHPS_RETURN_IF_ERROR(GetScalar(state, "stages", true, v));
  s.stages = static_cast<int>(v);
  SKETCHPS_RETURN_IF_ERROR(GetScalar(state, "direction", true, v));
  s.direction = static_cast<int>(v);
  SKETCHPS_RETURN_IF_ERROR(GetScalar(state, "window_calls", true, v));
  s.window_calls = static_cast<int>(v);
  SKETCHPS_RETURN_IF_ERROR(GetScalar(state, "window_ratio_sum", false, s.window_ratio_sum));
  SKETCHPS_RETURN_IF_ERROR(GetScalar(state, "windows", true, v));
  if (v < 0) return absl::InvalidArgumentError("sidco state: 'sidco.windows' is negative");
  s.windows = static_cast<std::uint64_t>(v);
  SKETCHPS_RETURN_IF_ERROR(GetScalar(state, "previous_stages", true, v));
  s.previous_stages = static_cast<int>(v);
  SKETCHPS_RETURN_IF_ERROR(GetScalar(state, "previous_ratio", false, s.previous_ratio));
  s.error_by_stages.resize(records);
  s.window_by_stages.resize(records);
  for (std::size_t m = 0; m < records; ++m) {
    SKETCHPS_RETURN_IF_ERROR(GetScalar(state, absl::StrCat("error_by_stages.", m), false, s.error_by_stages[m]));
    SKETCHPS_RETURN_IF_ERROR(GetScalar(state, absl::StrCat("window_by_stages.", m), true, v));
    if (v < 0) return absl::InvalidArgumentError("sidco state: a window_by_stages entry is negative");
    s.window_by_stages[m] = static_cast<std::uint64_t>(v);
  }
  return s;
}

class SidcoScheme final : public SchemeBase {
 public:
  SidcoScheme(SchemeContext ctx, const SidcoConfig& config)
      : SchemeBase(ctx),
        ef_(ctx.dim),
        sel_(ctx.dim),
        estimator_(MakeEstimator(config, TargetDensity(ctx), ctx.clock)) {}

  const char* name() const override { return "sidco"; }
  bool uses_global_momentum() const override { return true; }
  SchemeState SaveState() const override {
    SchemeState s{{{"residual", ef_.ToHost()}}, {}};
    if (estimator_.ok()) SaveAdaptState(estimator_->state(), s.scalars);
    return s;
  }
  absl::Status RestoreState(const SchemeState& state) override {
    SKETCHPS_RETURN_IF_ERROR(estimator_.status());
    const auto it = state.arrays.find("residual");
    if (it == state.arrays.end()) return absl::InvalidArgumentError("sidco state: missing array 'residual'");
    if (it->second.size() != ef_.dim()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sidco state: 'residual' has ", it->second.size(), " values, expected ", ef_.dim()));
    }
    SKETCHPS_ASSIGN_OR_RETURN(auto adapt, LoadAdaptState(state, estimator_->state().error_by_stages.size()));
    SKETCHPS_RETURN_IF_ERROR(estimator_->SetState(adapt));
    return ef_.FromHost(it->second);
  }

 protected:
  absl::StatusOr<const float*> Accumulate(const RoundInfo&, const float* d_grad) override {
    SKETCHPS_RETURN_IF_ERROR(estimator_.status());
    return ef_.Accumulate(d_grad, exec());
  }
  std::uint32_t CompressedPhases() const override { return 1; }
  PhaseSpec Spec(std::uint32_t) const override { return {Reduction::kSparseSum}; }
  absl::StatusOr<PayloadValue> Payload(std::uint32_t, const PhaseResults&) override {
    SKETCHPS_ASSIGN_OR_RETURN(const kernels::SidcoEstimate est, estimator_->Estimate(ef_.data(), ctx().dim, exec()));
    SKETCHPS_RETURN_IF_ERROR(sel_.SelectAbove(ef_.data(), ctx().dim, est.threshold, exec()));
    SKETCHPS_RETURN_IF_ERROR(ef_.Take(sel_, exec()));
    SKETCHPS_RETURN_IF_ERROR(estimator_->Record(sel_.count(), ctx().dim));
    set_selected(sel_.count());
    return PayloadValue{sel_.ToSparse(ctx().dim)};
  }
  absl::Status Update(const Aggregate&, const PhaseResults&) override { return absl::OkStatus(); }
  void OnDenseSent() override { ef_.Reset(); }
  const float* residual_data() const override { return ef_.data(); }

 private:
  static absl::StatusOr<kernels::SidcoEstimator> MakeEstimator(const SidcoConfig& config, double density,
                                                               const JobClock& clock) {
    SKETCHPS_RETURN_IF_ERROR(config.Validate("sidco"));
    return kernels::SidcoEstimator::Create(config.ToOptions(density, clock));
  }
  static double TargetDensity(const SchemeContext& ctx) {
    if (ctx.dim == 0) return 1.0;
    return std::min(1.0, static_cast<double>(std::max<std::uint64_t>(ctx.k, 1)) / static_cast<double>(ctx.dim));
  }

  ErrorFeedback ef_;
  Selection sel_;
  absl::StatusOr<kernels::SidcoEstimator> estimator_;  // an error only for an invalid config
};

}  // namespace

std::unique_ptr<Scheme> MakeSidcoScheme(SchemeContext ctx, const SidcoConfig& config) {
  return std::make_unique<SidcoScheme>(std::move(ctx), config);
}

}  // namespace sketchps
