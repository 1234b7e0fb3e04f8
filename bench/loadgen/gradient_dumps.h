// Real gradients for the load generator: the dumps `sketchps run --dump-gradients` writes
// (common/wire/gradient_dump.h, files grad-r<round>-w<worker>.skgd), in place of synthetic ones. Worker w
// of round t takes dump (t * P + w) mod N in (round, worker) order, so the workers cycle over all of
// them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/layout.h"

namespace sketchps::bench {

struct LoadedGradients {
  LayerTable layers;
  std::vector<std::vector<float>> gradients;                    // sorted by (round, worker)
  std::vector<std::pair<std::uint64_t, std::uint32_t>> origin;  // (round, worker) of each
};

// Loads every grad-r*-w*.skgd in `dir`. InvalidArgument naming --gradients: the directory cannot be
// read, holds no dump, or holds dumps with different layer tables; a dump's own errors name its file.
absl::StatusOr<LoadedGradients> LoadGradientDumps(const std::string& dir);

// The dump worker `rank` of round `round` uses among `workers` workers (see the header comment).
std::size_t DumpIndex(std::uint64_t round, std::uint32_t rank, std::uint32_t workers, std::size_t dumps);

}  // namespace sketchps::bench
