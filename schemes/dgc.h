// DGC — Deep Gradient Compression (Lin et al., ICLR 2018; docs/methods.md, dgc), parameter-server mode.
//
// State (schemes/local_momentum.h): the momentum u and the accumulated vector v, dim floats each.
// Each round, on the worker's gradient g over its shard range of dim entries:
//   g' = clip(g) (C / sqrt(P), off by default);  u = m u + g';  v = v + u   (or the Nesterov form)
//   per layer l of the range (the layer table, offsets relative to the range):
//     compressed layers (shape with > 1 dim):  I_l = kernels::DgcSelect(v_l, δ_e) — sampled
//       threshold, k_l = ⌈δ_e n_l⌉, |I_l| in [0.8 k_l, 1.3 k_l] (exactly k_l when resampled);
//     other layers (biases, BN parameters):   I_l = every entry (sent dense, inside the same payload)
//   phase 0  kSparseSum (union)   send (I, v[I]), I = ∪ I_l            8 |I| bytes up
//                                 receive the union of all workers'     8 |∪_i I^i| bytes down
//   G_t = (Σ_i v^i[I^i]) / contributors (MeanAggregate); the optimizer applies w -= lr G_t with
//   momentum 0 (uses_global_momentum() == false).
//   Then v[I] = 0 and, with momentum_masking, u[I_l] = 0 on the compressed layers only: DGC's code
//   runs uncompressed tensors through plain momentum (memory.compensate(accumulate=False)), which is
//   exactly what sending all of v and keeping u gives.
// Dense warm-up rounds (scheme.warmup_rounds) send all of v (4 dim bytes up and down) and zero v
// but keep u: warm-up is momentum SGD.
//
// Density: δ = ctx.k / ctx.dim, i.e. the job's scheme.density (DGC's compress_ratio, 0.001 in its
// code). Sparsity warm-up (the reference code's rule, with its epochs generalised to stages): the
// warm-up span (common/config/job_span.h, resolved against the job: R rounds) is cut into S = warmup_stages
// equal stages; round t < R is in stage s = ⌊t S / R⌋ and
//   s < S:       δ_s = warmup_densities[s] if given, else max(c^(s+1), δ), c = δ^(1/(S+1))
//   otherwise:   δ_s = δ
// warmup_epochs: W (the round-1 key) is warmup: W epochs with W stages, one per epoch: the paper's
// 0.25, 0.0625, 0.0156, 0.004, then 0.001 for δ = 0.001 and W = 4. The default warm-up is
// [4 epochs, 10%]: the paper's 4 epochs (2-4% of its 90-164-epoch jobs), at most a tenth of a short
// job, so a one-epoch job spends 90% of its rounds at δ (docs/methods.md).
// LR warm-up is the replicated optimizer's job: optimizer.lr.warmup_epochs = 5 and
// optimizer.lr.warmup_start_factor = 1/P give DGC's factor (e (P-1)/5 + 1)/P; set
// optimizer.momentum to 0 or leave it, it is ignored (DGC's momentum is `momentum` below).
//
// Hyperparameters (scheme.dgc), defaults from DGC's configs/dgc/__init__.py: momentum (0.9),
// nesterov (false), momentum_masking (true), clip_norm (0 = off), clip_scope ("layer"),
// sample_ratio (0.01), strided_sample (true), compress_upper_bound (1.3), compress_lower_bound (0.8),
// max_adaptation_iters (10), resample (true), truncate_to_k (false), warmup ([4 epochs, 10%]),
// warmup_stages (4), warmup_densities ([]), dense_max_numel (65536).
//
// Choices where the paper and code are silent, or differ from the code:
//   - the sample seed varies per (job seed, worker, shard, round, layer), so repeated runs repeat;
//   - a one-dimensional layer is sent dense only up to dense_max_numel entries. A layer cut by a shard
//     boundary reaches the scheme flattened to one dimension (common/layout.h ClipLayers), and such
//     a large vector is compressed rather than sent whole; real biases and BN vectors are far smaller;
//   - an empty layer table means one compressed layer over the whole range;
//   - weight decay is the replicated optimizer's (on w), not DGC's separate local-momentum term;
//   - at density 1 with masking, u is zeroed every round: plain SGD without momentum (a known pitfall of masking);
//     with momentum_masking = false, DGC at density 1 is momentum SGD.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/config/config_reader.h"
#include "common/config/job_span.h"
#include "engine/scheme.h"
#include "schemes/local_momentum.h"

namespace sketchps {

struct DgcConfig {
  LocalMomentumOptions momentum;  // momentum, nesterov, momentum_masking, clip_norm, clip_scope
  double sample_ratio = 0.01;     // in (0, 1]
  bool strided_sample = true;
  double compress_upper_bound = 1.3;  // >= 1
  double compress_lower_bound = 0.8;  // in (0, 1]
  int max_adaptation_iters = 10;      // in [0, 1000]
  bool resample = true;
  bool truncate_to_k = false;                                          // reference parity (kernels/dgc.h)
  JobSpan warmup = JobSpan::Epochs(4).AtMost(JobSpan::Fraction(0.1));  // sparsity warm-up (0: none)
  std::uint64_t warmup_stages = 4;                                     // S: density steps in the warm-up, in [1, 64]
  std::vector<double> warmup_densities;   // explicit δ_s for s < S (>= S entries, each in (0, 1])
  std::uint64_t dense_max_numel = 65536;  // 1-D layers up to this size are sent dense

  // Errors name the key under `prefix` ("scheme.dgc.sample_ratio: ...").
  absl::Status Validate(const std::string& prefix) const;
  // Reads every field above (LocalMomentumOptions::Read for the momentum keys) and warmup_epochs (see
  // above; not together with warmup or warmup_stages); rejects unknown keys; validates.
  absl::Status Read(ConfigReader& section);
};

// δ_s of round `round` for final density δ in (0, 1], the warm-up resolved against `clock`, as above.
// Assumes a valid config.
double DgcDensity(const DgcConfig& config, double final_density, std::uint64_t round, const JobClock& clock);
// δ_s of stage s (s >= warmup_stages: δ).
double DgcStageDensity(const DgcConfig& config, double final_density, std::uint64_t stage);

// One DGC worker for one shard range. The config must be valid (Validate()); a layer table that does
// not tile the range makes every round fail with InvalidArgument.
std::unique_ptr<Scheme> MakeDgcScheme(SchemeContext ctx, const DgcConfig& config);

}  // namespace sketchps
