#include "common/layout.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "common/wire/gradient_dump.h"

using sketchps::ClipLayers;
using sketchps::GradientDump;
using sketchps::GradientDumpName;
using sketchps::LayerTable;
using sketchps::MakeLayerTable;
using sketchps::MakeShardMap;
using sketchps::ReadGradientDump;
using sketchps::SplitProportionally;
using sketchps::ValidateLayerTable;
using sketchps::WriteGradientDump;

TEST_CASE("MakeLayerTable assigns consecutive offsets and validates", "[layout]") {
  const auto t = MakeLayerTable({{"conv.w", {8, 1, 3, 3}}, {"conv.b", {8}}, {"fc.w", {10, 72}}});
  REQUIRE(t.layers.size() == 3);
  CHECK(t.layers[1].offset == 72);
  CHECK(t.layers[2].offset == 80);
  CHECK(t.dim() == 800);
  CHECK(ValidateLayerTable(t).ok());
}

TEST_CASE("ValidateLayerTable names the broken layer", "[layout]") {
  auto t = MakeLayerTable({{"a", {4}}, {"b", {2, 3}}});
  SECTION("gap") {
    t.layers[1].offset = 5;
    const auto st = ValidateLayerTable(t);
    CHECK(st.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(st.message()), Catch::Contains("layers[1] 'b'") && Catch::Contains("offset 5"));
  }
  SECTION("shape mismatch") {
    t.layers[1].shape = {7};
    CHECK_THAT(std::string(ValidateLayerTable(t).message()), Catch::Contains("shape product 7 != numel 6"));
  }
  SECTION("duplicate name") {
    t.layers[1].name = "a";
    CHECK_THAT(std::string(ValidateLayerTable(t).message()), Catch::Contains("duplicate name"));
  }
}

TEST_CASE("Shard maps cover 0 to d in balanced contiguous ranges", "[layout]") {
  const auto t = MakeLayerTable({{"a", {1000}}, {"b", {10}}, {"c", {990}}, {"d", {7}}});
  for (std::uint32_t shards = 1; shards <= 7; ++shards) {
    auto map = MakeShardMap(t, shards);
    REQUIRE(map.ok());
    REQUIRE(map->ranges.size() == shards);
    CHECK(map->ranges.front().lo == 0);
    CHECK(map->ranges.back().hi == t.dim());
    for (std::size_t s = 0; s + 1 < shards; ++s) CHECK(map->ranges[s].hi == map->ranges[s + 1].lo);
    const double ideal = static_cast<double>(t.dim()) / shards;
    for (const auto& r : map->ranges) CHECK(std::abs(static_cast<double>(r.size()) - ideal) <= 0.1 * ideal + 1);
  }
  SECTION("two shards cut at the layer boundary when it is balanced") {
    auto map = MakeShardMap(t, 2);
    CHECK(map->ranges[0].hi == 1000);  // the boundary nearest the even cut at 1003
  }
  CHECK(!MakeShardMap(t, 0).ok());
  CHECK(!MakeShardMap(t, 5000).ok());
}

TEST_CASE("ClipLayers keeps whole layers and flattens cut ones", "[layout]") {
  const auto t = MakeLayerTable({{"a", {2, 5}}, {"b", {3, 4}}});
  const auto c = ClipLayers(t, 5, 14);
  REQUIRE(c.layers.size() == 2);
  CHECK(c.layers[0].name == "a");
  CHECK(c.layers[0].offset == 0);
  CHECK(c.layers[0].numel == 5);
  CHECK(c.layers[0].shape == std::vector<std::int64_t>{5});
  CHECK(c.layers[1].offset == 5);
  CHECK(c.layers[1].numel == 4);
  CHECK(ClipLayers(t, 10, 22).layers.size() == 1);
  CHECK(ClipLayers(t, 10, 22).layers[0].shape == std::vector<std::int64_t>{3, 4});
}

TEST_CASE("SplitProportionally sums to the total and follows range sizes", "[layout]") {
  sketchps::ShardMap map{{{0, 100}, {100, 400}, {400, 1000}}};
  const auto s = SplitProportionally(10, map);
  CHECK(s == std::vector<std::uint64_t>{1, 3, 6});
  const auto r = SplitProportionally(7, map);
  CHECK(r[0] + r[1] + r[2] == 7);
  CHECK(SplitProportionally(1, map) == std::vector<std::uint64_t>{1, 1, 1});           // min_each wins
  CHECK(SplitProportionally(5000, map) == std::vector<std::uint64_t>{100, 300, 600});  // capped by size
}

TEST_CASE("A gradient dump round-trips, and a damaged one is refused naming the file", "[layout]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("sketchps-dump-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  GradientDump dump;
  dump.job_id = "j";
  dump.model = "mlp";
  dump.worker_id = 1;
  dump.num_workers = 2;
  dump.round = 7;
  dump.layers = MakeLayerTable({{"w", {2, 3}}, {"b", {3}}});
  dump.values = {1, -2, 3, -4, 5, -6, 7, 8, 9};
  const std::string path = (dir / GradientDumpName(7, 1)).string();
  CHECK_THAT(path, Catch::EndsWith("grad-r00000007-w1.skgd"));
  REQUIRE(WriteGradientDump(path, dump).ok());
  auto back = ReadGradientDump(path);
  REQUIRE(back.ok());
  CHECK(back->values == dump.values);
  CHECK(back->round == 7);
  CHECK(back->layers.dim() == 9);
  CHECK(back->worker_id == 1);
  dump.values.pop_back();
  CHECK_THAT(std::string(WriteGradientDump(path, dump).message()), Catch::Contains("8 values for a layout of 9"));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(30);
    f.put('\x7f');  // one byte of the payload: the CRC no longer matches
  }
  auto damaged = ReadGradientDump(path);
  CHECK(damaged.status().code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(damaged.status().message()), Catch::Contains(path) && Catch::Contains("CRC"));
  fs::remove_all(dir);
}
