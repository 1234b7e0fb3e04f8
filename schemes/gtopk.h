// gTop-k S-SGD (Shi et al., ICDCS/IJCAI 2019; docs/methods.md, gtopk and decision 8), parameter-server
// mode.
//
// Per round, worker i (error feedback on the worker, global momentum in the replicated optimizer):
//   1. a = e + g; I_i = the k largest |a| (kernels::TopK: |a| descending, then index ascending);
//      the worker sends (I_i, a[I_i]) and provisionally sets e = a - sent (e[I_i] = 0).
//   2. One phase, kSparseSum with keep = k: the shard sums the P local selections on their union and
//      keeps the global top-k of the sums (I_glob, ties by smaller index). G_t = that sum / contributors,
//      i.e. G[I_glob] = V_glob / P as in the reference code.
//   3. Residual fix-up: the values this worker sent at indices that did NOT survive into
//      I_glob go back into its residual, e[I_i \ I_glob] += a[I_i \ I_glob] (onto zeros, so exactly
//      e_new + a ⊙ (mask_local ∧ mask_global) == a).
// State: the residual e (dim floats, saved as "residual"). Hyperparameters: k (from the job's density,
// ctx.k) and the common dense warm-up (ctx.warmup_rounds); GTopKConfig has no fields of its own.
// Bytes per worker per round and shard: up 8·min(k, dim) (u32 index + f32 value per entry), down
// 8·|I_glob| <= 8k. (PS mode; the decentralized recursive doubling, log2(P) messages of 8k bytes,
// comes later and reuses GTopKWorker.)
//
// Choices where the paper and code are silent:
//   - The PS shard computes the exact global top-k of the summed union; unlike the reference's tree
//     merge nothing is dropped at intermediate merges, so the reference's "lost contribution" caveat is absent.
//   - A global sum that cancels to exactly 0 drops out of the result (engine/reduce.h); its index is
//     then not in I_glob and every worker puts its own value back (nothing was applied there).
//   - A worker that skipped the round (NaN/Inf guard) keeps its state; the others' fix-up is unchanged.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/config_reader.h"
#include "common/payload.h"
#include "engine/scheme.h"
#include "kernels/backend.h"
#include "schemes/error_feedback.h"

namespace sketchps {

struct GTopKConfig {
  // No method-specific hyperparameters (k and warm-up are job-level). Always OK.
  absl::Status Validate(const std::string& prefix) const;
  // Accepts an empty (or absent) section; unknown keys are errors naming the key.
  absl::Status Read(ConfigReader& section);
};

// The per-worker half of gTop-k, independent of how the global top-k is formed (PS shard here, the
// recursive-doubling collective later): accumulate, select locally, fix up the residual.
// Not thread-safe; device buffers of the active backend.
class GTopKWorker {
 public:
  GTopKWorker(std::uint64_t dim, std::uint64_t k);

  // a = e + g in place (d_grad: dim device floats); returns a (valid until the next call).
  absl::StatusOr<const float*> Accumulate(const float* d_grad, const kernels::Exec& exec);
  // The local top-k (I_i, a[I_i]), index-sorted; removes it from the residual (e[I_i] = 0) and keeps a
  // host copy for PutBack.
  absl::StatusOr<SparseVector> SelectLocal(const kernels::Exec& exec);
  // e[I_i \ I_glob] += a[I_i \ I_glob] for the last SelectLocal. global: strictly increasing indices.
  absl::Status PutBack(const std::vector<std::uint32_t>& global, const kernels::Exec& exec);
  // A dense round sent all of a: e = 0.
  void Reset() { ef_.Reset(); }

  const SparseVector& last_sent() const { return sent_; }
  ErrorFeedback& residual() { return ef_; }
  const ErrorFeedback& residual() const { return ef_; }

 private:
  const std::uint64_t k_;
  ErrorFeedback ef_;
  Selection sel_;
  SparseVector sent_;
  kernels::DeviceArray<std::uint32_t> back_idx_;
  kernels::DeviceArray<float> back_val_;
};

// PS-mode gTop-k over one shard's range (ctx.dim entries, ctx.k kept). uses_global_momentum() is true.
std::unique_ptr<Scheme> MakeGTopKScheme(SchemeContext ctx, const GTopKConfig& config = {});

}  // namespace sketchps
