// The flat parameter layout and its split into server shards.
//
// A model's parameters are one contiguous float32 vector of length d. The LayerTable names its
// pieces (name, offset, numel, shape) in order, without gaps or overlaps. A ShardMap splits [0, d)
// into S contiguous ranges [lo_s, hi_s) balanced in elements; where cutting at layer boundaries keeps
// every shard within 10% of the ideal size, it cuts there, so per-layer methods see whole layers.
//
// Quantities that scale with size (k, sketch columns) are split across shards in proportion to the
// range length (SplitProportionally). All functions are pure; types are plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sketchps {

struct Layer {
  std::string name;
  std::uint64_t offset = 0;  // first element in the flat vector
  std::uint64_t numel = 0;
  std::vector<std::int64_t> shape;  // product equals numel
};

struct LayerTable {
  std::vector<Layer> layers;
  std::uint64_t dim() const { return layers.empty() ? 0 : layers.back().offset + layers.back().numel; }
};

// Builds a table from (name, shape) pairs, assigning consecutive offsets.
LayerTable MakeLayerTable(const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& shapes);

// Checks offsets are consecutive from 0, numel > 0 and equals the product of the shape, names unique,
// and d < 2^32. Errors name the layer ("layers[3] 'fc1.weight': ...").
absl::Status ValidateLayerTable(const LayerTable& table);

// The layers intersecting [lo, hi), clipped to it, with offsets relative to lo. A clipped layer keeps
// its name; its shape becomes {numel} when it was cut.
LayerTable ClipLayers(const LayerTable& table, std::uint64_t lo, std::uint64_t hi);

struct ShardRange {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  std::uint64_t size() const { return hi - lo; }
};

struct ShardMap {
  std::vector<ShardRange> ranges;
};

// Splits the table's [0, d) into `shards` ranges as described above. Errors: shards == 0 or more
// shards than elements.
absl::StatusOr<ShardMap> MakeShardMap(const LayerTable& table, std::uint32_t shards);

// Splits `total` over ranges in proportion to their sizes (largest remainder), each share at least
// `min_each` and at most the range size. The shares sum to `total` unless the minimums force more.
std::vector<std::uint64_t> SplitProportionally(std::uint64_t total, const ShardMap& map, std::uint64_t min_each = 1);

}  // namespace sketchps
