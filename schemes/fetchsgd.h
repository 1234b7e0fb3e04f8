// FetchSGD (Rothchild et al., ICML 2020; docs/methods.md, fetchsgd): momentum and error feedback in
// sketch space, kept with the reduction instead of on the workers.
//
// Workers are stateless. Each compressed round, per shard range of d entries with k kept entries:
//   phase 0  kSketchMomentumError, keep k, momentum rho
//            send S(g), the r x c Count Sketch of this round's gradient      4rc bytes up (2rc: f16)
//            the reducer (the shard in PS mode, every peer in decentralized mode) averages the tables,
//            S = sum S(g_i) / n, folds them into its momentum and error sketches
//              S_u = rho S_u + S;  S_e = S_e + S_u
//            takes Delta = the k largest |estimates| of S_e and zeroes every cell of S_u and S_e that
//            is nonzero in S(Delta) (FetchSGD's code; engine/reduce.h has the contract)
//            receive Delta (k estimated values)                               8k bytes down
//   G_t = Delta, applied by the replicated optimizer with momentum 0 (uses_global_momentum() ==
//   false: the momentum is rho, in sketch space; optimizer.momentum is ignored as for the other
//   local-momentum schemes).
//
// Hyperparameters (scheme.fetchsgd): rows (0: auto), cols_factor (0: auto), cols (0: ceil(cols_factor *
// k)), table (f16), momentum rho (0.9). Auto sizing (SizingFor) spends the same 20k cells either way:
//   k >= 0.5% of the range: r = 1, c = 20k. Zeroing S(Delta)'s cells wipes k of every row's c cells each
//     round, a twentieth at c = 20k and a quarter at c = 4k; on the default CNN job at density 0.01,
//     r = 1, c = 20k reached 87.5% where r = 5, c = 4k reached 82.7%;
//   k < 0.5% of the range: r = 5, c = 4k. With one row every entry of a cell gets the cell's estimate,
//     and at 1 / (20 density) entries per cell (17 at 0.003) r = 1 diverged on the CNN at 0.003 and
//     0.001, where r = 5, c = 4k reached 77.7% and 70.3% (docs/methods.md "fetchsgd"; one run each).
// An explicit rows or cols_factor is kept as given (cols_factor auto is then 20 / rows). Sketch
// hashing and seeding as schemes/sketch_exchange.h (SketchSeed(seed, shard): every worker of a shard and
// its reducer agree; the reducer takes r and c from the table).
//
// Choices where the paper and the code differ or are silent:
//   - one phase, estimated values: the workers hold no state, so there is no exact second phase
//     (sending g's exact values at the candidates would be possible but is not done: the paper and
//     its code use the estimates);
//   - the tables are averaged (S = sum / n) like every other method's G_t; the code sums and folds
//     the worker count into the learning rate;
//   - error accumulation without the learning rate ("virtual" error, error_type=virtual in the code);
//     the optimizer applies the learning rate to Delta (a schedule then scales Delta, not S_e);
//   - the paper's S_e -= S(Delta) is replaced by the code's zeroing of S(Delta)'s nonzero cells, in
//     S_e and S_u (momentum masking);
//   - dense warm-up rounds bypass the sketch reduction: they are plain SGD without momentum, and the
//     sketches start from zero at the first compressed round;
//   - every coordinate of the range is sketched (no dense biases), no numBlocks, no clipping or noise.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/config/config_reader.h"
#include "engine/scheme.h"
#include "schemes/sketch_exchange.h"

namespace sketchps {

// The sketch fields of SketchSizing that FetchSGD uses (rows, cols_factor, cols, table; one phase:
// p2 = 0 always) and the momentum rho. rows and cols_factor 0 mean auto (SizingFor).
struct FetchSgdConfig : SketchSizing {
  static constexpr double kAutoCells = 20;            // auto sizing: rows x cols = 20k cells
  static constexpr std::uint32_t kAutoRowsBelow = 5;  // auto sizing: the rows below OneRowSuits
  // Auto sizing's rule: one row when k >= 0.5% of the range.
  static bool OneRowSuits(std::uint64_t k, std::uint64_t dim) { return 200 * k >= dim; }

  FetchSgdConfig() {
    p2 = 0;
    rows = 0;
    cols_factor = 0;
  }
  double momentum = 0.9;  // rho, the momentum of the momentum sketch, in [0, 1)

  // The sizing of a range of `dim` entries keeping k (>= 1): rows and cols_factor resolved as above.
  SketchSizing SizingFor(std::uint64_t k, std::uint64_t dim) const { return Resolved(OneRowSuits(k, dim)); }
  // The sizing with auto rows resolved to 1 (one_row) or kAutoRowsBelow, auto cols_factor to 20 / rows.
  SketchSizing Resolved(bool one_row) const;

  // Errors name the key under `prefix` (e.g. "scheme.fetchsgd.momentum: ...").
  absl::Status Validate(const std::string& prefix) const;
  // Reads rows, cols_factor, cols, table, momentum; rejects unknown keys (p2 and keep too); validates.
  absl::Status Read(ConfigReader& section);
};

// One FetchSGD worker for one shard range. The config must be valid (Validate()).
std::unique_ptr<Scheme> MakeFetchSgdScheme(SchemeContext ctx, const FetchSgdConfig& config);

}  // namespace sketchps
