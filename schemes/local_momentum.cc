#include "schemes/local_momentum.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/sparse.h"
#include "kernels/vector_ops.h"

namespace sketchps {
namespace {

// torch.nn.utils.clip_grad_norm_'s guard against a zero norm.
constexpr double kClipEpsilon = 1e-6;

double ClipScale(double norm, double bound) {
  const double scale = bound / (norm + kClipEpsilon);
  return scale < 1.0 ? scale : 1.0;
}

}  // namespace

absl::Status LocalMomentumOptions::Validate(const std::string& prefix) const {
  if (!(momentum >= 0.0 && momentum < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ".momentum must be in [0, 1), got ", momentum));
  }
  if (!(std::isfinite(clip_norm) && clip_norm >= 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, ".clip_norm must be finite and >= 0 (0 disables clipping), got ", clip_norm));
  }
  return absl::OkStatus();
}

absl::Status LocalMomentumOptions::Read(ConfigReader& section) {
  SKETCHPS_RETURN_IF_ERROR(
      section.GetAll("momentum", momentum, "nesterov", nesterov, "momentum_masking", masking, "clip_norm", clip_norm));
  std::string scope = clip_scope == ClipScope::kLayer ? "layer" : "global";
  SKETCHPS_RETURN_IF_ERROR(section.Get("clip_scope", scope));
  if (scope == "layer") {
    clip_scope = ClipScope::kLayer;
  } else if (scope == "global") {
    clip_scope = ClipScope::kGlobal;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(section.KeyPath("clip_scope"), ": expected 'layer' or 'global', got '", scope, "'"));
  }
  return absl::OkStatus();
}

LocalMomentum::LocalMomentum(std::uint64_t dim, std::vector<kernels::Segment> layers, std::uint32_t num_workers,
                             const LocalMomentumOptions& options)
    : options_(options),
      bound_(options.clip_norm / std::sqrt(static_cast<double>(std::max<std::uint32_t>(num_workers, 1)))),
      layers_(layers.empty() ? std::vector<kernels::Segment>{{0, dim}} : std::move(layers)),
      scales_(layers_.size(), 1.0),
      u_(dim),
      v_(dim) {
  u_.Zero();
  v_.Zero();
}

absl::Status LocalMomentum::ComputeScales(const float* d_grad, const kernels::Exec& exec) {
  scales_.assign(layers_.size(), 1.0);
  if (options_.clip_norm <= 0.0) return absl::OkStatus();
  if (options_.clip_scope == ClipScope::kGlobal) {
    SKETCHPS_ASSIGN_OR_RETURN(const double norm, kernels::Norm2(d_grad, dim(), exec));
    scales_.assign(layers_.size(), ClipScale(norm, bound_));
    return absl::OkStatus();
  }
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    SKETCHPS_ASSIGN_OR_RETURN(const double norm, kernels::Norm2(d_grad + layers_[l].offset, layers_[l].size, exec));
    scales_[l] = ClipScale(norm, bound_);
  }
  return absl::OkStatus();
}

absl::StatusOr<const float*> LocalMomentum::Accumulate(const float* d_grad, const kernels::Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(ComputeScales(d_grad, exec));
  const auto m = static_cast<float>(options_.momentum);
  // One pass over the range unless each layer has its own clipping factor.
  const bool per_layer = options_.clip_norm > 0.0 && options_.clip_scope == ClipScope::kLayer;
  const std::vector<kernels::Segment> whole = {{0, dim()}};
  const auto& parts = per_layer ? layers_ : whole;
  for (std::size_t l = 0; l < parts.size(); ++l) {
    const auto [offset, n] = parts[l];
    const auto s = static_cast<float>(scales_[l]);
    float* u = u_.data() + offset;
    float* v = v_.data() + offset;
    const float* g = d_grad + offset;
    if (options_.nesterov) {
      SKETCHPS_RETURN_IF_ERROR(kernels::Axpy(s, g, u, n, exec));  // u = m (u + g)
      SKETCHPS_RETURN_IF_ERROR(kernels::Scale(m, u, n, exec));
      SKETCHPS_RETURN_IF_ERROR(kernels::Axpy(1.0f, u, v, n, exec));  // v = v + u + g
      SKETCHPS_RETURN_IF_ERROR(kernels::Axpy(s, g, v, n, exec));
    } else {
      SKETCHPS_RETURN_IF_ERROR(kernels::Scale(m, u, n, exec));  // u = m u + g
      SKETCHPS_RETURN_IF_ERROR(kernels::Axpy(s, g, u, n, exec));
      SKETCHPS_RETURN_IF_ERROR(kernels::Axpy(1.0f, u, v, n, exec));  // v = v + u
    }
  }
  return static_cast<const float*>(v_.data());
}

absl::Status LocalMomentum::Take(const std::uint32_t* d_idx, std::uint64_t count, bool mask_momentum,
                                 const kernels::Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(kernels::FillAt(v_.data(), dim(), d_idx, count, 0.0f, exec));
  if (!(options_.masking && mask_momentum)) return absl::OkStatus();
  return kernels::FillAt(u_.data(), dim(), d_idx, count, 0.0f, exec);
}

void LocalMomentum::Save(SchemeState& state) const {
  state.arrays["momentum"] = u_.ToHost();
  state.arrays["velocity"] = v_.ToHost();
}

absl::Status LocalMomentum::Restore(const SchemeState& state) {
  kernels::DeviceArray<float> u(dim()), v(dim());
  SKETCHPS_RETURN_IF_ERROR(RestoreArray(state, "momentum", "local momentum", u));
  SKETCHPS_RETURN_IF_ERROR(RestoreArray(state, "velocity", "local momentum", v));
  u_ = std::move(u);
  v_ = std::move(v);
  return absl::OkStatus();
}

absl::Status RestoreArray(const SchemeState& state, const std::string& name, const std::string& what,
                          kernels::DeviceArray<float>& out) {
  const auto it = state.arrays.find(name);
  if (it == state.arrays.end()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": missing array '", name, "'"));
  }
  if (it->second.size() != out.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": array '", name, "' has ", it->second.size(), " values, expected ", out.size()));
  }
  out.FromHost(it->second);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<kernels::Segment>> LayerSegments(const LayerTable& layers, std::uint64_t dim) {
  if (layers.layers.empty()) return std::vector<kernels::Segment>{{0, dim}};
  std::vector<kernels::Segment> out;
  std::uint64_t next = 0;
  for (const Layer& layer : layers.layers) {
    if (layer.offset != next || layer.numel == 0) {
      return absl::InvalidArgumentError(absl::StrCat("layer '", layer.name, "' at offset ", layer.offset, " with ",
                                                     layer.numel, " entries does not continue at ", next));
    }
    out.push_back({layer.offset, layer.numel});
    next += layer.numel;
  }
  if (next != dim) {
    return absl::InvalidArgumentError(absl::StrCat("the layers cover ", next, " entries, the range has ", dim));
  }
  return out;
}

}  // namespace sketchps
