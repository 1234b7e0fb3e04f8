// ScaleCom (Chen et al., NeurIPS 2020; docs/methods.md, scalecom and decision 7), parameter-server mode:
// cyclic local top-k (CLT-k) with low-pass-filtered error feedback and global momentum.
//
// Per round t, every worker j (P = ctx.num_workers, leader ℓ = t mod P):
//   p_j = m_j + g_j.
//   Phase 0, kLeaderIndexSet(leader ℓ): the leader sends IndexSet I = indices of TopK(p_ℓ, k)
//     (kernels::TopK order: |p| descending, then index ascending); the others send an empty IndexSet
//     over ctx.dim. The result, seen by every worker, is the leader's I (index-sorted).
//   Phase 1, kDenseSum at_previous_indices: every worker sends DenseValues p_j[I] (|I| floats, in I's
//     order). The result is the SparseVector of Σ_j p_j[I] on I, so G_t = mean_j CLT-k(p_j), which equals
//     CLT-k(mean_j p_j) (the shared mask makes compression commute with summation).
//   Memory (low-pass filter): m_j <- (1 - β)·m_j + β·(p_j - CLT-k(p_j)). β = 1 is standard error
//     feedback (then m_j = p_j with p_j[I] = 0, exactly); β < 1 intentionally breaks EF conservation.
// State: the memory m (dim floats, saved as "memory"); p is a per-round buffer. Hyperparameters: k
// (ctx.k, from the job's density), β (ScaleComConfig::beta, default 1.0), the common dense warm-up.
// Bytes per worker per round and shard (raw encodings): up 4·|I| from the leader in phase 0 (0 from the
// others) plus 4·|I| per worker in phase 1; down 4·|I| (phase 0) + 8·|I| (phase 1 result, a
// SparseVector); |I| = min(k, dim). Independent of P (no index union: the pull stays k entries).
//
// Choices where the paper is silent (docs/methods.md, decision 7):
//   - β defaults to 1.0 (decision 7); momentum is global (the replicated optimizer).
//   - The leader schedule uses the global round number t (warm-up rounds included), ℓ = t mod P.
//   - Top-k is over the whole shard range (no chunk-wise selection); no layer is excluded.
//   - A leader that skipped the round (NaN/Inf guard) contributes no index set: I is empty, G_t = 0 on
//     this shard, and every worker's memory becomes (1 - β)·m + β·p (nothing was sent).
//   - A dense warm-up round sends all of p; the memory is cleared (warm-up precedes compression, so
//     it is 0 then anyway).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/config/config_reader.h"
#include "engine/scheme.h"

namespace sketchps {

struct ScaleComConfig {
  double beta = 1.0;  // low-pass filter coefficient of the memory, in (0, 1]

  // InvalidArgument naming "<prefix>.beta" when β is outside (0, 1].
  absl::Status Validate(const std::string& prefix) const;
  // Reads `beta`, rejects unknown keys, then validates.
  absl::Status Read(ConfigReader& section);
  // Capability (schemes/registry.h): the leader cycles over every slot (round mod workers), so a round
  // led by an absent slot would apply nothing: never with an elastic job.
  std::string ElasticRefusal(const ConfigReader&) const {
    return "scalecom's leader cycles over every slot (round mod workers), so a round led by an absent slot would "
           "apply nothing";
  }
};

// ScaleCom over one shard's range. uses_global_momentum() is true. `config` must be valid.
std::unique_ptr<Scheme> MakeScaleComScheme(SchemeContext ctx, const ScaleComConfig& config = {});

}  // namespace sketchps
