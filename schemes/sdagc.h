// SDAGC — Standard Deviation based Adaptive Gradient Compression (docs/methods.md, sdagc and
// decision 5). No public code or full text exists: this is the project's reconstruction.
//
// State (schemes/local_momentum.h): the momentum u and the accumulated vector v (dim floats each),
// plus λ when the closed loop is on. Each round, on the worker's gradient g over its shard range:
//   g' = clip(g) (local gradient clipping at C / sqrt(P), off by default)
//   u = m u + g';  v = v + u          ("momentum compensation"; v is the residual accumulation)
//   per layer l:  τ_l = λ_t σ_l       (kernels::SdagcThresholds: σ_l = population std of v_l)
//                 I_l = {i in l : |v_i| > τ_l}, or, when that holds fewer than min_per_layer
//                 entries, the min_per_layer largest nonzero |v_i| of the layer
//   phase 0  kSparseSum (union)   send (I, v[I]), I = ∪ I_l            8 |I| bytes up
//                                 receive the union of all workers'     8 |∪_i I^i| bytes down
//   G_t = (Σ_i v^i[I^i]) / contributors; the optimizer applies it with momentum 0
//   (uses_global_momentum() == false). Then v[I] = 0 and u[I] = 0 (momentum_masking).
// Dense warm-up rounds (scheme.warmup_rounds) send all of v (4 dim bytes up and down), zero v and
// keep u (momentum SGD).
//
// λ_t: kernels::SdagcLambda — linear in the round from lambda_initial to lambda_final over the
// warm-up (a span, common/config/job_span.h: default [4 epochs, 10%], the paper's DGC-length warm-up capped
// at a tenth of a short job). With closed_loop (the default), from the end of the warm-up on, λ
// follows kernels::SdagcLambdaController toward target_density (0, the default: the job's
// scheme.density; started at lambda_final, updated after every compressed round from this worker's
// own selected / dim). Without it λ stays at lambda_final and the gradients decide the density.
// On a Gaussian layer the selected fraction is erfc(λ/√2): λ_final = 3.09 selects 0.2% of a fresh
// gradient (500x fewer entries; 8-byte entries: 250x fewer bytes than fp32 dense). In steady state
// fewer pass, because the entries v keeps accumulating inflate σ (measured on i.i.d. Gaussian
// gradients, d = 1e5: 1e-4 to 2e-4 with m = 0 or 0.9). The closed loop (target 0.002) settles near
// λ = 2.2-2.4 on Gaussian and Laplace gradients. Its gain defaults to 0.1, not the controller's 1.0:
// v's shape depends on the previous thresholds (a round that sends much leaves a truncated v). With
// gain 1, λ oscillated between rounds sending nothing and rounds sending 4-9%; with gain 0.25 and
// m = 0.9 it sat far below the target between bursts; gain 0.1 kept every round within 1.5x of the
// target after 100 rounds (d = 1e5, Gaussian and Laplace gradients, m = 0 and 0.9).
//
// "Adaptive learning-rate revision" (decision 5: the LR warm-up from lr/P to lr) is the replicated
// optimizer's: optimizer.warmup = the same span and optimizer.warmup_start_factor = 1/P.
//
// Hyperparameters (scheme.sdagc): momentum (0.9), nesterov (false), momentum_masking (true),
// clip_norm (0 = off; decision 5's clipping needs a model-specific C), clip_scope ("layer"),
// lambda_initial (1.0), lambda_final (3.09), warmup ([4 epochs, 10%]; warmup_epochs: W is the round-1
// spelling of W epochs), closed_loop (true), target_density (0: the job's scheme.density), gain (0.1),
// min_lambda (0.5), max_lambda (12), min_per_layer (1). With closed_loop false the job's
// scheme.density is not used: the thresholds set the density.
//
// Choices where the sources are silent:
//   - every layer is thresholded, including one-dimensional ones (no DGC "dim > 1" rule): the rule
//     is per-layer statistics, and a one-entry layer (σ = 0) is then always sent when nonzero;
//   - min_per_layer (default 1) guarantees progress. A pure relative threshold can deadlock: when a
//     layer's v grows along a fixed direction (a steady gradient, e.g. full-batch training near the
//     optimum), its entries' ratios |v_i| / σ stay constant, so if none exceeds λ the layer is never
//     sent and its weights never move (seen with min_per_layer = 0: least squares, P = 1, λ = 1.5, a
//     5-entry bias never sent and left 83% off, the whole model 15% off). It adds at most one entry
//     per layer per round (about 160 entries for ResNet-50's tensors); 0 restores the pure threshold;
//   - the selection is strict (|v| > τ); λ = 0 sends every nonzero entry of v, so with λ = 0 and
//     masking SDAGC is plain SGD without momentum;
//   - λ is per worker (each worker's closed loop sees its own density); the aggregate is the same on
//     every worker regardless;
//   - an empty layer table means one layer over the whole range.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/config/config_reader.h"
#include "common/config/job_span.h"
#include "engine/scheme.h"
#include "schemes/local_momentum.h"

namespace sketchps {

struct SdagcConfig {
  LocalMomentumOptions momentum;  // momentum, nesterov, momentum_masking, clip_norm, clip_scope
  double lambda_initial = 1.0;    // λ at round 0, finite and >= 0
  double lambda_final = 3.09;     // λ after the warm-up, finite and >= 0
  JobSpan warmup = JobSpan::Epochs(4).AtMost(JobSpan::Fraction(0.1));  // 0: λ_final from the start
  bool closed_loop = true;      // after the warm-up, steer λ toward target_density
  double target_density = 0.0;  // in [0, 1); 0: the job's scheme.density
  double gain = 0.1;            // in (0, 2]; see the closed-loop note above
  double min_lambda = 0.5;      // 0 < min_lambda <= lambda_final <= max_lambda (closed loop)
  double max_lambda = 12.0;
  std::uint64_t min_per_layer = 1;  // a layer whose threshold selects fewer sends its largest nonzero |v|

  // Errors name the key under `prefix` ("scheme.sdagc.lambda_final: ...").
  absl::Status Validate(const std::string& prefix) const;
  // Reads every field above; rejects unknown keys; validates.
  absl::Status Read(ConfigReader& section);
};

// One SDAGC worker for one shard range. The config must be valid (Validate()); a layer table that
// does not tile the range makes every round fail with InvalidArgument.
std::unique_ptr<Scheme> MakeSdagcScheme(SchemeContext ctx, const SdagcConfig& config);

}  // namespace sketchps
