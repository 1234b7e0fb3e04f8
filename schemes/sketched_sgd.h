// Sketched-SGD (Ivkin et al., NeurIPS 2019; docs/methods.md, sketched_sgd), parameter-server mode.
//
// Worker state: the momentum u and the accumulator v (dim floats each; local momentum correction,
// docs/methods.md, decision 2). Each compressed round, per shard range of d entries with k kept entries and
// K = min(p2 * k, d) candidates:
//   u = m u + g;  v = v + u                      (learning rate on the final update, the code default)
//   p2 > 0:  phase 0  kSketchRecover, keep K     send S(v), an r x c Count Sketch     4rc bytes up
//                                                receive the K candidates (estimates)  8K bytes down
//            phase 1  kDenseSum at the candidates, keep k
//                                                send v at the K candidates            4K bytes up
//                                                receive the k largest exact sums     <= 8k bytes down
//   p2 = 0:  phase 0  kSketchRecover, keep k     send S(v); G_t = mean of the k estimates
//   G_t = (sum over workers, restricted to the kept set) / contributors      (MeanAggregate)
//   u and v zeroed at G_t's index set ("momentum stopping" and "error reset").
// The optimizer runs with momentum 0 (uses_global_momentum() == false): w = w - lr * G_t.
//
// Hyperparameters (scheme.sketched_sgd): rows (5), cols_factor (4), cols (0: ceil(cols_factor * k)),
// p2 (2), keep (top_k: the paper's exact top-k of the candidates), table (f16), momentum m (0.9, the local
// momentum coefficient). Sketch sizing, hashing and
// seeding: schemes/sketch_exchange.h. selected() reports |G_t|, the entries the round took from v.
//
// Choices where the paper and code are silent or that differ from the reference code:
//   - the local momentum correction is implemented here (a few kernel calls), not in a shared
//     schemes/local_momentum.h (another branch may add one; this one does not depend on it);
//   - every coordinate of the range is sketched (no uncompressed biases / small layers), no p1
//     truncation, the table travels as f16 by default, p2 is not capped at P (the code asserts p2 <= P);
//   - gradients are the workers' mean gradients and G_t a mean (the code sums and scales the lr);
//   - weight decay, if any, is the replicated optimizer's (applied to w), not added to g;
//   - a dense warm-up round sends v whole and zeroes v but keeps u, so warm-up is momentum SGD;
//   - at density 1 (every entry kept) masking zeroes u every round: plain SGD without momentum.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/config/config_reader.h"
#include "engine/scheme.h"
#include "schemes/sketch_exchange.h"

namespace sketchps {

// Sketched-SGD keeps the paper's exact top-k of the candidates (keep: top_k, p2 = 2), with the
// compact f16 table of SketchSizing's defaults (c = 4k).
struct SketchedSgdConfig : SketchSizing {
  SketchedSgdConfig() {
    p2 = 2;
    keep = Keep::kTopK;
  }
  double momentum = 0.9;  // m, local momentum coefficient, in [0, 1)

  // Errors name the key under `prefix` (e.g. "scheme.sketched_sgd.momentum: ...").
  absl::Status Validate(const std::string& prefix) const;
  // Reads rows, cols_factor, cols, p2, momentum; rejects unknown keys; validates.
  absl::Status Read(ConfigReader& section);
};

// One Sketched-SGD worker for one shard range. The config must be valid (Validate()).
std::unique_ptr<Scheme> MakeSketchedSgdScheme(SchemeContext ctx, const SketchedSgdConfig& config);

}  // namespace sketchps
