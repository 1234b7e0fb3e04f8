// SIDCo (Abdelmoniem et al., MLSys 2021; docs/methods.md, sidco and decision 6): threshold
// sparsification with a fitted sparsity-inducing distribution, error feedback and global momentum.
//
// Per round, worker i:
//   1. a = e + g (error feedback with the reference defaults w_g = 1, w_m = 0, i.e. plain EF).
//   2. η = kernels::SidcoEstimator::Estimate(a) (variant E / P / GP, multi-stage fitting with first-stage
//      ratio δ1, stage count fixed, per-stage-ratio or adaptive; see kernels/sidco.h), target density
//      δ = ctx.k / ctx.dim.
//   3. Send (I, a[I]) with I = {j : |a_j| > η} (kernels::ThresholdSelect, index order); e = a - sent
//      (e[I] = 0, values moved, so sent + e == a exactly). The achieved count |I| is fed back with
//      SidcoEstimator::Record (it drives the adaptive stage count).
//   One phase, kSparseSum (keep 0: the union of the selections); G_t = sum / contributors.
// State: the residual e ("residual", dim floats) and the estimator's adaptation state (scalars
// "sidco.stages", "sidco.direction", "sidco.window_calls", "sidco.window_ratio_sum", "sidco.windows",
// "sidco.previous_stages", "sidco.previous_ratio", "sidco.error_by_stages.<M>", "sidco.window_by_stages.<M>").
// Bytes per worker per round and shard: up 8·|I| (variable; about 8k), down 8·|union of the P sets|.
//
// Choices where the paper and code are silent or the project decided (documented in kernels/sidco.h):
//   - Defaults (decision 6): adaptive stage count (direction-searching rule, not the reference's mode
//     -1), first-stage ratio 0.25, variant E (the estimator's default), initial M = 1, windows of 5
//     rounds. adapt_window is a span (common/config/job_span.h: "5 rounds", "1%"); its default does not grow
//     with the job: it is the period of a control loop that tracks the achieved density, not a phase of
//     training (docs/methods.md).
//   - The whole shard range is one group (the reference's default `partition=1`), not per layer.
//   - No L2 normalisation (the fits are scale-equivariant, so the selection is the same).
//   - The selection buffer has capacity dim, so any threshold is honoured without truncation (memory:
//     8 bytes per entry of the range on top of the 4-byte residual).
//   - Rounds where the worker skipped (NaN/Inf guard) or sent densely (warm-up) are not fed to Record.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/config/config_reader.h"
#include "common/config/job_span.h"
#include "engine/scheme.h"
#include "kernels/sidco.h"

namespace sketchps {

struct SidcoConfig {
  std::string variant = "exponential";  // "exponential" (SIDCo-E), "gpareto" (SIDCo-P), "gamma_gpareto" (SIDCo-GP)
  std::string stage_mode = "adaptive";  // "adaptive", "fixed" or "per_stage_ratio"
  int stages = 1;                       // fixed: M in [1, 64]; adaptive: the initial M (clamped)
  double first_stage_ratio = 0.25;      // δ1, in (0, 1)
  double per_stage_ratio = 0.2;         // per_stage_ratio mode: q of every later stage, in (0, 1)
  JobSpan adapt_window = JobSpan::Rounds(5);  // an adaptation window (one call per round), > 0
  double adapt_tolerance_up = 0.2;            // ε_up, >= 0
  double adapt_tolerance_down = 0.2;          // ε_down, in [0, 1)
  int adapt_memory = 20;                      // windows a per-M error record stays valid, >= 0
  int gamma_newton_steps = 3;                 // Newton steps on the gamma shape MLE, in [0, 20]

  // adapt_window in calls (rounds) for the job of `clock`: at least 1.
  int AdaptWindowCalls(const JobClock& clock) const;
  // The estimator options for a target density (in (0, 1]). Requires a valid config.
  kernels::SidcoOptions ToOptions(double density, const JobClock& clock = {}) const;
  // InvalidArgument naming "<prefix>.<field>" for the first invalid field.
  absl::Status Validate(const std::string& prefix) const;
  // Reads every field, rejects unknown keys, then validates.
  absl::Status Read(ConfigReader& section);
};

// SIDCo over one shard's range. uses_global_momentum() is true. `config` must be valid.
std::unique_ptr<Scheme> MakeSidcoScheme(SchemeContext ctx, const SidcoConfig& config = {});

}  // namespace sketchps
