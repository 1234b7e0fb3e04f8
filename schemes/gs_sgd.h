// gs-SGD, global-sketching SGD (docs/methods.md, gs_sgd and decision 4), parameter-server mode.
// The project's flagship method; the paper's algorithm is not public, so this is the project's
// reconstruction (docs/methods.md, decision 4).
//
// Worker state: the error-feedback residual e (dim floats). Each compressed round, per shard range
// of d entries with k kept entries, K = min(p2 * k, d) candidates:
//   a = e + g                                    (error feedback on the worker, no learning rate)
//   p2 > 0:  phase 0  kSketchRecover, keep K     send S(a), an r x c Count Sketch     4rc bytes up
//                                                receive the K candidates (estimates)  8K bytes down
//            phase 1  kDenseSum at the candidates, keep k
//                                                send a at the K candidates            4K bytes up
//                                                receive the k largest exact sums     <= 8k bytes down
//   p2 = 0:  phase 0  kSketchRecover, keep k     send S(a); G_t = mean of the k estimates
//   G_t = (sum over workers, restricted to the kept set) / contributors      (MeanAggregate)
//   e = a with the entries in G_t's index set zeroed: at the kept indices exactly what was sent is
//       removed (sent + residual == a, bitwise); candidates that were not kept stay in e.
// The replicated optimizer applies global momentum to G_t (uses_global_momentum() == true; the
// project default, decision 2). Dense warm-up rounds send a whole and reset e to 0.
//
// Hyperparameters (scheme.gs_sgd): rows (5), cols_factor (4), cols (0: ceil(cols_factor * k)),
// p2 (8), keep (candidates), table (f16); docs/methods.md "Sketch sizing". Sketch sizing, hashing and seeding:
// schemes/sketch_exchange.h. selected() reports |G_t|, the entries the round took from this worker's residual.
//
// Choices where the paper is silent: the topology is the aggregator's (shards sum the sketch tables;
// in decentralized mode the peers sum them by recursive doubling, peer/); a second, exact value
// round at p2 * k candidates; no learning rate inside the residual; one fixed hash per shard for the run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/config/config_reader.h"
#include "engine/scheme.h"
#include "schemes/sketch_exchange.h"

namespace sketchps {

struct GsSgdConfig : SketchSizing {
  // Errors name the key under `prefix` (e.g. "scheme.gs_sgd.rows: ...").
  absl::Status Validate(const std::string& prefix) const { return SketchSizing::Validate(prefix); }
  // Reads rows, cols_factor, cols, p2; rejects unknown keys; validates.
  absl::Status Read(ConfigReader& section);
};

// One gs-SGD worker for one shard range. The config must be valid (Validate()).
std::unique_ptr<Scheme> MakeGsSgdScheme(SchemeContext ctx, const GsSgdConfig& config);

}  // namespace sketchps
