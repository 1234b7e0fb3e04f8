#include "schemes/dgc.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/splitmix.h"
#include "common/status.h"
#include "kernels/dgc.h"
#include "kernels/index_ops.h"
#include "kernels/vector_ops.h"
#include "schemes/local_momentum_scheme.h"

namespace sketchps {
namespace {

absl::Status RangeError(const std::string& key, double value, const char* requirement) {
  return absl::InvalidArgumentError(absl::StrCat(key, " must be ", requirement, ", got ", value));
}

kernels::DgcSelectOptions SelectOptions(const DgcConfig& c, double density) {
  kernels::DgcSelectOptions o;
  o.compress_ratio = density;
  o.sample_ratio = c.sample_ratio;
  o.strided_sample = c.strided_sample;
  o.compress_upper_bound = c.compress_upper_bound;
  o.compress_lower_bound = c.compress_lower_bound;
  o.max_adaptation_iters = c.max_adaptation_iters;
  o.resample = c.resample;
  o.truncate_to_k = c.truncate_to_k;
  return o;
}

// The largest δ_e of the schedule: capacities are sized for it once.
double MaxDensity(const DgcConfig& c, double density) {
  double max = density;
  for (std::uint64_t s = 0; s < c.warmup_stages; ++s) max = std::max(max, DgcStageDensity(c, density, s));
  return max;
}

struct LayerPlan {
  kernels::Segment segment;
  bool compressed = true;
};

// The range's layers with their compression flags, and the selection capacity they need.
struct Layout {
  absl::Status status;
  std::vector<LayerPlan> layers;
  std::uint64_t capacity = 0;
};

Layout PlanLayout(const SchemeContext& ctx, const DgcConfig& config, double density) {
  Layout out;
  auto segments = LayerSegments(ctx.layers, ctx.dim);
  if (!segments.ok()) {
    out.status = segments.status();
    return out;
  }
  const auto options = SelectOptions(config, MaxDensity(config, density));
  for (std::size_t l = 0; l < segments->size(); ++l) {
    const kernels::Segment s = (*segments)[l];
    const bool one_dim = !ctx.layers.layers.empty() && ctx.layers.layers[l].shape.size() <= 1;
    const bool compressed = !(one_dim && s.size <= config.dense_max_numel);
    out.layers.push_back({s, compressed});
    auto cap = compressed ? kernels::DgcCapacity(s.size, options) : absl::StatusOr<std::size_t>(s.size);
    if (!cap.ok()) {
      out.status = cap.status();
      return out;
    }
    out.capacity += *cap;
  }
  return out;
}

std::vector<kernels::Segment> Segments(const std::vector<LayerPlan>& layers) {
  std::vector<kernels::Segment> out;
  for (const auto& l : layers) out.push_back(l.segment);
  return out;
}

class DgcScheme final : public LocalMomentumScheme {
 public:
  DgcScheme(SchemeContext ctx, const DgcConfig& config, double density, Layout layout)
      : LocalMomentumScheme(ctx, layout.status, Segments(layout.layers), config.momentum, layout.capacity),
        config_(config),
        density_(density),
        layers_(std::move(layout.layers)),
        chunks_(layers_.size()) {}

  const char* name() const override { return "dgc"; }

 protected:
  absl::Status Update(const Aggregate&, const PhaseResults&) override {
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const auto [start, count] = chunks_[l];
      SKETCHPS_RETURN_IF_ERROR(lm_.Take(sel_.idx() + start, count, layers_[l].compressed, exec()));
    }
    return absl::OkStatus();
  }

 private:
  std::uint64_t LayerSeed(std::size_t layer) const {
    std::uint64_t h = SplitMix64(ctx().seed);
    for (std::uint64_t x :
         {std::uint64_t{ctx().worker_id}, std::uint64_t{ctx().shard_id}, round().round, std::uint64_t{layer}}) {
      h = SplitMix64(h ^ x);
    }
    return h;
  }

  // Fills sel_ layer by layer (so indices increase) and records each layer's chunk of it.
  absl::Status Select() override {
    const auto options = SelectOptions(config_, DgcDensity(config_, density_, round().round, ctx().clock));
    const float* v = lm_.velocity();
    std::uint64_t pos = 0;
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const auto [offset, n] = layers_[l].segment;
      const auto off32 = static_cast<std::uint32_t>(offset);
      std::uint64_t count = n;
      if (layers_[l].compressed) {
        SKETCHPS_ASSIGN_OR_RETURN(
            const auto r, kernels::DgcSelect(v + offset, n, options, LayerSeed(l), sel_.idx() + pos, sel_.val() + pos,
                                             sel_.capacity() - pos, exec()));
        count = r.count;
        SKETCHPS_RETURN_IF_ERROR(kernels::OffsetIndices(sel_.idx() + pos, count, off32, exec()));
      } else {
        SKETCHPS_RETURN_IF_ERROR(kernels::IndexSequence(sel_.idx() + pos, n, off32, exec()));
        SKETCHPS_RETURN_IF_ERROR(kernels::Copy(v + offset, sel_.val() + pos, n, exec()));
      }
      chunks_[l] = {pos, count};
      pos += count;
    }
    sel_.set_count(pos);
    set_selected(pos);
    return absl::OkStatus();
  }

  const DgcConfig config_;
  const double density_;  // δ after warm-up
  const std::vector<LayerPlan> layers_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> chunks_;  // per layer: (start, count) in sel_
};

}  // namespace

absl::Status DgcConfig::Validate(const std::string& prefix) const {
  SKETCHPS_RETURN_IF_ERROR(momentum.Validate(prefix));
  if (!(sample_ratio > 0.0 && sample_ratio <= 1.0))
    return RangeError(prefix + ".sample_ratio", sample_ratio, "in (0, 1]");
  if (!(compress_upper_bound >= 1.0 && compress_upper_bound <= 1e6)) {
    return RangeError(prefix + ".compress_upper_bound", compress_upper_bound, "in [1, 1e6]");
  }
  if (!(compress_lower_bound > 0.0 && compress_lower_bound <= 1.0)) {
    return RangeError(prefix + ".compress_lower_bound", compress_lower_bound, "in (0, 1]");
  }
  if (max_adaptation_iters < 0 || max_adaptation_iters > 1000) {
    return RangeError(prefix + ".max_adaptation_iters", max_adaptation_iters, "in [0, 1000]");
  }
  if (warmup_stages < 1 || warmup_stages > 64)
    return RangeError(prefix + ".warmup_stages", warmup_stages, "in [1, 64]");
  if (!warmup_densities.empty() && warmup_densities.size() < warmup_stages) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ".warmup_densities has ", warmup_densities.size(),
                                                   " entries, needs at least warmup_stages = ", warmup_stages));
  }
  for (std::size_t i = 0; i < warmup_densities.size(); ++i) {
    if (!(warmup_densities[i] > 0.0 && warmup_densities[i] <= 1.0)) {
      return RangeError(absl::StrCat(prefix, ".warmup_densities[", i, "]"), warmup_densities[i], "in (0, 1]");
    }
  }
  return absl::OkStatus();
}

absl::Status DgcConfig::Read(ConfigReader& section) {
  SKETCHPS_RETURN_IF_ERROR(momentum.Read(section));
  SKETCHPS_RETURN_IF_ERROR(
      section.GetAll("sample_ratio", sample_ratio, "strided_sample", strided_sample, "compress_upper_bound",
                     compress_upper_bound, "compress_lower_bound", compress_lower_bound, "max_adaptation_iters",
                     max_adaptation_iters, "resample", resample, "truncate_to_k", truncate_to_k, "warmup_stages",
                     warmup_stages, "warmup_densities", warmup_densities, "dense_max_numel", dense_max_numel));
  SKETCHPS_ASSIGN_OR_RETURN(const auto epochs,
                            ReadSpanOrLegacy(section, "warmup", "warmup_epochs", JobSpan::Unit::kEpochs, warmup));
  if (epochs.has_value()) {  // the round-1 key: W epochs in W stages
    if (section.Has("warmup_stages")) {
      return absl::InvalidArgumentError(section.KeyPath("warmup_epochs") +
                                        ": give warmup and warmup_stages, or warmup_epochs, not both");
    }
    if (*epochs > 64) return RangeError(section.KeyPath("warmup_epochs"), *epochs, "at most 64 (a stage per epoch)");
    warmup_stages = std::max<std::uint64_t>(static_cast<std::uint64_t>(std::ceil(*epochs)), 1);
  }
  return section.FinishAndValidate(*this);
}

double DgcStageDensity(const DgcConfig& config, double final_density, std::uint64_t stage) {
  if (stage >= config.warmup_stages) return final_density;
  if (!config.warmup_densities.empty()) return config.warmup_densities[stage];
  const double c = std::pow(final_density, 1.0 / static_cast<double>(config.warmup_stages + 1));
  return std::max(std::pow(c, static_cast<double>(stage) + 1.0), final_density);
}

double DgcDensity(const DgcConfig& config, double final_density, std::uint64_t round, const JobClock& clock) {
  const double length = config.warmup.Rounds(clock);
  const auto t = static_cast<double>(round);
  if (!(t < length)) return final_density;
  const auto stage = static_cast<std::uint64_t>(std::floor(t * static_cast<double>(config.warmup_stages) / length));
  return DgcStageDensity(config, final_density, stage);
}

std::unique_ptr<Scheme> MakeDgcScheme(SchemeContext ctx, const DgcConfig& config) {
  const auto k = static_cast<double>(std::max<std::uint64_t>(ctx.k, 1));
  const double density = std::min(1.0, k / static_cast<double>(std::max<std::uint64_t>(ctx.dim, 1)));
  Layout layout = PlanLayout(ctx, config, density);
  return std::make_unique<DgcScheme>(std::move(ctx), config, density, std::move(layout));
}

}  // namespace sketchps
