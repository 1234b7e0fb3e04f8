// DGC's sampled-threshold selection (docs/methods.md, dgc), following the reference code
// (synxlin/deep-gradient-compression `dgc/compression.py` `_sparsify`).
//
// Given the importance |v| of one tensor (n entries) and a density δ:
//   1. k = ⌈δ·n⌉ (DgcPlan). Sample importances: strided (every `stride`-th entry from a start offset
//      in [0, stride)) or, with strided_sample = false, num_samples uniform positions with
//      replacement. Sampling is deterministic in (n, options, seed); the exact positions are given
//      below so that a host reference can reproduce them. When n ≤ ⌈2/δ⌉, or the stride search
//      reaches 1, or sample_ratio = 1, the sample is the whole vector.
//   2. τ = the ⌈num_samples·δ⌉-th largest sampled importance. Selected = {i : |v_i| ≥ τ}.
//   3. Adaptation, at most max_adaptation_iters recounts: count > upper·k → exact top-k when
//      `resample` (stop), else τ ← τ·upper; count < lower·k → τ ← τ·lower; otherwise stop.
//      τ is float32 and each step is a float32 multiply, as in the reference.
//   4. If the count still exceeds upper·k, the exact top-k is kept (overflow guard, see below).
// The "exact top-k among the selected" equals the global top-k (kernels::TopK order: |v| descending,
// index ascending), because at least k entries reach τ and so every top-k entry does; it is computed
// that way, without compacting the oversized selection first.
//
// Deliberate deviations from the reference code (project decisions, documented here):
//   - The reference finally truncates the selection to its first k indices, which favours the front
//     of the tensor and makes the output differ from {|v| ≥ τ}. By default we keep the whole
//     selection (count in [lower·k, upper·k]); truncate_to_k = true restores the reference behaviour.
//   - The reference skips adaptation when the sample is the whole vector. We always run it; it only
//     matters when ties at τ push the count above upper·k, where we keep the exact top-k instead of
//     the first k by position.
//   - Overflow guard (step 4): the count never exceeds DgcCapacity, whatever the data, so callers
//     can size payload buffers up front.
//   - NaN importances are sampled as 0 and never selected (inputs should pass the NaN/Inf guard).
//
// Sample positions: strided start = SplitMix64(seed) % stride, positions start, start + stride, ...
// below n; uniform positions p_s = SplitMix64(seed + 1 + s) % n for s in [0, num_samples).
//
// Pointers are device pointers of the active backend; temporaries come from exec.scratch (non-null).
// Errors are InvalidArgument naming the field or argument. Results are identical on every backend
// and thread count. Thread-safety: as the Exec.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace sketchps::kernels {

// Selection options; defaults are the reference code's (configs/dgc/__init__.py).
// Momentum and momentum masking belong to the DGC scheme's memory, not to selection.
struct DgcSelectOptions {
  double compress_ratio = 0.001;      // δ, in (0, 1]
  double sample_ratio = 0.01;         // sampled fraction, in (0, 1]; 1 samples everything
  bool strided_sample = true;         // strided with a random start; false: uniform with replacement
  double compress_upper_bound = 1.3;  // >= 1
  double compress_lower_bound = 0.8;  // in (0, 1]
  int max_adaptation_iters = 10;      // in [0, 1000]
  bool resample = true;               // too many selected: exact top-k (true) or raise τ (false)
  bool truncate_to_k = false;         // reference parity: keep only the first k selected indices
};

// OK, or InvalidArgument naming the first invalid field.
absl::Status ValidateDgcSelectOptions(const DgcSelectOptions& options);

// Per-tensor constants of the reference code's `initialize`.
struct DgcPlan {
  std::size_t target = 0;         // k = ⌈δ·n⌉ ("num_selects")
  std::size_t num_samples = 0;    // m; equal to n when the whole vector is the sample
  std::size_t stride = 1;         // strided sampling step (1: whole vector)
  std::size_t top_k_samples = 0;  // ⌈m·δ⌉: τ is this-th largest sampled importance
};

// The plan for a tensor of n entries. Errors: invalid options, or n >= 2^32.
absl::StatusOr<DgcPlan> PlanDgc(std::size_t n, const DgcSelectOptions& options);

// The most entries DgcSelect can write for n entries: k with truncate_to_k, else max(k, ⌊upper·k⌋).
absl::StatusOr<std::size_t> DgcCapacity(std::size_t n, const DgcSelectOptions& options);

// What DgcSelect did.
struct DgcSelection {
  std::size_t count = 0;     // entries written, index-sorted
  std::size_t target = 0;    // k
  float threshold = 0.0f;    // final τ; unless resampled or truncated, output == {i : |v_i| >= τ}
  int adaptation_iters = 0;  // recounts after the first count
  bool resampled = false;    // exact top-k kept instead (count == k unless NaNs)
  bool truncated = false;    // truncate_to_k cut a selection larger than k
};

// Selects entries of d_v[0..n) as described above and writes their indices (strictly increasing) and
// signed values to d_out_idx / d_out_val, which hold `capacity` elements. `seed` picks the sample
// (vary it per step, like the reference's random start).
// Errors: InvalidArgument for invalid options (field named), n >= 2^32, null pointers, or
// capacity < DgcCapacity(n, options).
absl::StatusOr<DgcSelection> DgcSelect(const float* d_v, std::size_t n, const DgcSelectOptions& options,
                                       std::uint64_t seed, std::uint32_t* d_out_idx, float* d_out_val,
                                       std::size_t capacity, const Exec& exec);

}  // namespace sketchps::kernels
