// Local momentum correction with masking and local gradient clipping (docs/methods.md, dgc):
// the worker-side state DGC, SDAGC ("momentum compensation") and Sketched-SGD share.
//
// State over one range of `dim` floats (device memory): the momentum u and the accumulated
// corrected-momentum vector v (DGC's code calls them "momentums" and "velocities"). Each round:
//
//   g' = clip(g)                  scale g so that ||g'|| <= C / sqrt(P) (off when C == 0); per layer
//                                 or over the whole range; scale = C/sqrt(P) / (||g|| + 1e-6) when
//                                 below 1, as torch's clip_grad_norm_ that DGC's code calls
//   u  = m u + g'                 (Nesterov: u = m (u + g'))
//   v  = v + u                    (Nesterov: v = v + u + g')
//
// The scheme compresses v, sends v at an index set I and then calls Take(I): v[I] = 0 ("error
// reset"), and u[I] = 0 ("momentum factor masking") when masking is on and the caller asks for it.
// The values sent are copied out of v, so sent + remaining v == v exactly. With m = 0 this is plain
// error feedback (a = e + g). The replicated optimizer then runs with momentum 0.
//
// Clipping over the "whole range" means the scheme's shard range: the global norm across shards
// would need a round of communication; with one shard it is the model's global norm.
// Not thread-safe; one owner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/config_reader.h"
#include "engine/scheme.h"
#include "kernels/backend.h"
#include "kernels/stats.h"

namespace sketchps {

enum class ClipScope { kLayer, kGlobal };

struct LocalMomentumOptions {
  double momentum = 0.9;                     // m, in [0, 1)
  bool nesterov = false;                     // u = m (u + g); v = v + u + g
  bool masking = true;                       // Take() zeroes u at the sent indices
  double clip_norm = 0.0;                    // C >= 0; 0 disables clipping (DGC's code default)
  ClipScope clip_scope = ClipScope::kLayer;  // "layer" (per-tensor, DGC's clip_grad_norm_) or "global"

  // Errors name the key under `prefix` ("scheme.dgc.momentum must be in [0, 1), got 1.5").
  absl::Status Validate(const std::string& prefix) const;
  // Reads momentum, nesterov, momentum_masking, clip_norm, clip_scope ("layer" | "global") from
  // `section` (keeps defaults for absent keys). Does not call Finish(): the scheme's Read does.
  absl::Status Read(ConfigReader& section);
};

class LocalMomentum {
 public:
  // `layers` tile [0, dim) in order (per-layer clipping scopes); empty means one layer [0, dim).
  // P = num_workers (the clipping bound is C / sqrt(P)). Options must be valid (Validate()).
  LocalMomentum(std::uint64_t dim, std::vector<kernels::Segment> layers, std::uint32_t num_workers,
                const LocalMomentumOptions& options);

  // Clips g, updates u and v as above, and returns v (dim floats, owned here). d_grad is not written.
  absl::StatusOr<const float*> Accumulate(const float* d_grad, const kernels::Exec& exec);
  // v[I] = 0 and, when options.masking && mask_momentum, u[I] = 0, for the count indices at d_idx.
  absl::Status Take(const std::uint32_t* d_idx, std::uint64_t count, bool mask_momentum, const kernels::Exec& exec);
  // v = 0, u kept (a dense round sent all of v: plain momentum SGD, DGC's uncompressed tensors).
  void ResetAccumulated() { v_.Zero(); }

  // The clipping factor applied to each layer's gradient in the last Accumulate (1 when unclipped).
  const std::vector<double>& last_clip_scales() const { return scales_; }
  const LocalMomentumOptions& options() const { return options_; }
  std::uint64_t dim() const { return v_.size(); }
  const float* velocity() const { return v_.data(); }

  // Arrays "momentum" (u) and "velocity" (v) of dim floats each.
  void Save(SchemeState& state) const;
  // InvalidArgument when an array is missing or has the wrong size (state untouched then).
  absl::Status Restore(const SchemeState& state);

 private:
  absl::Status ComputeScales(const float* d_grad, const kernels::Exec& exec);

  const LocalMomentumOptions options_;
  const double bound_;  // C / sqrt(P)
  std::vector<kernels::Segment> layers_;
  std::vector<double> scales_;  // per layer of layers_
  kernels::DeviceArray<float> u_;
  kernels::DeviceArray<float> v_;
};

// Copies state.arrays[name] into `out`. InvalidArgument ("<what>: missing array 'name'",
// "...: array 'name' has 3 values, expected 4") when absent or mis-sized; `out` is then untouched.
absl::Status RestoreArray(const SchemeState& state, const std::string& name, const std::string& what,
                          kernels::DeviceArray<float>& out);

// The range's layers as segments (offsets relative to the range). An empty table gives the one
// segment [0, dim). InvalidArgument when the layers do not tile [0, dim) in order.
absl::StatusOr<std::vector<kernels::Segment>> LayerSegments(const LayerTable& layers, std::uint64_t dim);

}  // namespace sketchps
