#include "common/layout.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace sketchps {
namespace {

constexpr double kBalanceTolerance = 0.10;

std::uint64_t ShapeProduct(const std::vector<std::int64_t>& shape) {
  std::uint64_t p = 1;
  for (auto s : shape) p *= static_cast<std::uint64_t>(std::max<std::int64_t>(s, 0));
  return p;
}

// Even split of [0, d) ignoring layers.
ShardMap EvenSplit(std::uint64_t d, std::uint32_t shards) {
  ShardMap map;
  for (std::uint32_t s = 0; s < shards; ++s) map.ranges.push_back({d * s / shards, d * (s + 1) / shards});
  return map;
}

// Moves each interior cut of `map` to the nearest layer boundary. Leaves `map` unchanged and returns
// false when any shard would then be empty or leave the balance tolerance.
bool SnapToLayers(const LayerTable& table, ShardMap& map) {
  std::vector<std::uint64_t> bounds;
  for (const auto& l : table.layers) bounds.push_back(l.offset + l.numel);
  const std::uint64_t d = table.dim();
  const double ideal = static_cast<double>(d) / static_cast<double>(map.ranges.size());
  ShardMap snapped = map;
  for (std::size_t s = 0; s + 1 < map.ranges.size(); ++s) {
    const std::uint64_t cut = map.ranges[s].hi;
    auto it = std::lower_bound(bounds.begin(), bounds.end(), cut);
    std::uint64_t best = it == bounds.end() ? d : *it;
    if (it != bounds.begin() && cut - *(it - 1) < best - cut) best = *(it - 1);
    snapped.ranges[s].hi = best;
    snapped.ranges[s + 1].lo = best;
  }
  for (const auto& r : snapped.ranges) {
    if (r.hi <= r.lo) return false;
    if (std::abs(static_cast<double>(r.size()) - ideal) > kBalanceTolerance * ideal) return false;
  }
  map = snapped;
  return true;
}

}  // namespace

LayerTable MakeLayerTable(const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& shapes) {
  LayerTable table;
  std::uint64_t offset = 0;
  for (const auto& [name, shape] : shapes) {
    const std::uint64_t numel = ShapeProduct(shape);
    table.layers.push_back({name, offset, numel, shape});
    offset += numel;
  }
  return table;
}

absl::Status ValidateLayerTable(const LayerTable& table) {
  std::uint64_t expected = 0;
  std::set<std::string> names;
  for (std::size_t i = 0; i < table.layers.size(); ++i) {
    const Layer& l = table.layers[i];
    const std::string where = absl::StrCat("layers[", i, "] '", l.name, "': ");
    if (l.name.empty()) return absl::InvalidArgumentError(absl::StrCat(where, "name is empty"));
    if (!names.insert(l.name).second) return absl::InvalidArgumentError(absl::StrCat(where, "duplicate name"));
    if (l.offset != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "offset ", l.offset, " but previous layer ends at ", expected));
    }
    if (l.numel == 0) return absl::InvalidArgumentError(absl::StrCat(where, "numel is 0"));
    if (ShapeProduct(l.shape) != l.numel) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "shape product ", ShapeProduct(l.shape), " != numel ", l.numel));
    }
    expected += l.numel;
  }
  if (expected >= (std::uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(absl::StrCat("layers: total size ", expected, " exceeds 2^32 - 1"));
  }
  return absl::OkStatus();
}

LayerTable ClipLayers(const LayerTable& table, std::uint64_t lo, std::uint64_t hi) {
  LayerTable out;
  for (const auto& l : table.layers) {
    const std::uint64_t a = std::max(l.offset, lo);
    const std::uint64_t b = std::min(l.offset + l.numel, hi);
    if (a >= b) continue;
    const bool whole = a == l.offset && b == l.offset + l.numel;
    out.layers.push_back(
        {l.name, a - lo, b - a, whole ? l.shape : std::vector<std::int64_t>{static_cast<std::int64_t>(b - a)}});
  }
  return out;
}

absl::StatusOr<ShardMap> MakeShardMap(const LayerTable& table, std::uint32_t shards) {
  const std::uint64_t d = table.dim();
  if (shards == 0) return absl::InvalidArgumentError("shards must be >= 1");
  if (shards > d)
    return absl::InvalidArgumentError(absl::StrCat("shards (", shards, ") exceed the parameter count (", d, ")"));
  ShardMap map = EvenSplit(d, shards);
  SnapToLayers(table, map);  // keeps the even split when snapping would unbalance it
  return map;
}

std::vector<std::uint64_t> SplitProportionally(std::uint64_t total, const ShardMap& map, std::uint64_t min_each) {
  std::uint64_t d = 0;
  for (const auto& r : map.ranges) d += r.size();
  std::vector<std::uint64_t> share(map.ranges.size());
  std::vector<std::pair<double, std::size_t>> remainders;
  std::uint64_t given = 0;
  for (std::size_t s = 0; s < map.ranges.size(); ++s) {
    const double exact =
        static_cast<double>(total) * static_cast<double>(map.ranges[s].size()) / static_cast<double>(d);
    share[s] = static_cast<std::uint64_t>(exact);
    given += share[s];
    remainders.push_back({exact - static_cast<double>(share[s]), s});
  }
  std::stable_sort(remainders.begin(), remainders.end(), [](auto a, auto b) { return a.first > b.first; });
  for (std::size_t i = 0; given < total && i < remainders.size(); ++i, ++given) ++share[remainders[i].second];
  for (std::size_t s = 0; s < share.size(); ++s) {
    share[s] = std::min(std::max(share[s], min_each), map.ranges[s].size());
  }
  return share;
}

}  // namespace sketchps
