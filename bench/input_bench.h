// `sketchps bench --input FILE...`: the compression primitives on real gradients that workers dumped
// (`sketchps run --dump-gradients ROUNDS`, common/wire/gradient_dump.h), instead of synthetic ones.
//
// The dumps are grouped by round; each round's workers form one job step. Every shard range of the
// layout (ShardMap over `servers` shards, as the job splits it) is measured on its own, with
// k = floor(density * range length) as the schemes use:
//   - selection density: per worker, the share of the range each selection method picks for the
//     target density (top-k, DGC's sampled threshold, SIDCo E / P / GP, SDAGC per layer), as the
//     mean over the round's workers: how far real gradients move the thresholds off their target;
//   - sketch recall: the workers' vectors are sketched with the shard's hash (rows x cols_factor k
//     columns, the seed the schemes use), the tables summed (linearity) and the K = p2 k candidates
//     recovered, as gs-SGD and Sketched-SGD do. Against the exact sum of the workers' vectors:
//       recall   = |true top-k ∩ candidates| / k (the exact second phase keeps these);
//       energy   = sum of squares of the sum over the candidates / that over its true top-K
//                  (how much of the best possible K-set the candidates hold; what keep: candidates
//                  applies);
//       up bytes = per worker per shard, 2 rc (f16 table) + 4K (exact values at the candidates).
// Raw gradients are measured (not the error-feedback accumulators the schemes compress, which
// the dumps do not hold); docs/reports/benchmarks.md discusses what that means for the figures.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sketchps::bench {

struct InputOptions {
  std::vector<std::string> files;  // gradient dumps; several rounds may be mixed
  std::uint32_t servers = 2;       // shards of the layout
  double density = 0.01;
  std::vector<std::uint32_t> rows = {3, 5};
  std::vector<double> cols_factors = {1, 2, 4, 10};
  std::vector<std::uint32_t> p2s = {2, 4, 8};
  std::uint64_t seed = 1;  // the job seed (train.seed): the sketch hashes
};

struct SelectionRow {
  std::uint64_t round = 0;
  std::uint32_t shard = 0;
  std::string method;
  double density_target = 0;
  double density_achieved = 0;  // mean over the round's workers
};

struct RecallRow {
  std::uint64_t round = 0;
  std::uint32_t shard = 0;
  std::uint32_t workers = 0;
  std::uint32_t rows = 0;
  double cols_factor = 0;
  std::uint32_t p2 = 0;
  std::uint64_t k = 0;
  std::uint64_t candidates = 0;
  double cells_per_element = 0;  // rows * cols / range length
  double recall = 0;
  double energy = 0;
  std::uint64_t up_bytes = 0;
};

struct InputReport {
  std::vector<SelectionRow> selection;
  std::vector<RecallRow> recall;
};

// Errors: InvalidArgument naming the option (no files, density out of (0, 1], ...) or the file (a
// dump that does not read, dumps of one round with different layouts).
absl::StatusOr<InputReport> RunInputBenchmarks(const InputOptions& options,
                                               const std::function<void(const std::string&)>& progress);

// Markdown tables of the report (selection, then recall with one row per configuration, averaged
// over rounds and shards).
std::string InputReportMarkdown(const InputReport& report);

}  // namespace sketchps::bench
