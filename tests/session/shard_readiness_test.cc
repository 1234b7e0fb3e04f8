// ShardReadiness (session/shard_readiness.h): a shard is signalled once, when the last parameter that
// overlaps it is complete, or at Finish; a parameter marked twice is reported; nothing is signalled
// while disarmed.
#include "session/shard_readiness.h"

#include <algorithm>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"

namespace sketchps::session {
namespace {

// Three layers of 4, 2 and 6 values; shards [0, 5) and [5, 12): layer 1 straddles both.
LayerTable Layers() { return MakeLayerTable({{"a", {4}}, {"b", {2}}, {"c", {2, 3}}}); }
ShardMap Shards() { return ShardMap{{{0, 5}, {5, 12}}}; }

struct Signals {
  std::mutex mu;
  std::vector<std::uint32_t> shards;
  std::function<void(std::uint32_t)> Callback() {
    return [this](std::uint32_t s) {
      std::lock_guard<std::mutex> lock(mu);
      shards.push_back(s);
    };
  }
};

TEST_CASE("ShardReadiness: a shard is ready when every parameter overlapping it is", "[worker][readiness]") {
  auto r = *ShardReadiness::Create(Layers(), Shards());
  Signals got;
  r->Arm(got.Callback());
  r->MarkComplete(2);  // c: all of shard 1 but b's second value
  CHECK(got.shards.empty());
  r->MarkComplete(1);  // b completes shard 1 (a is still missing for shard 0)
  CHECK(got.shards == std::vector<std::uint32_t>{1});
  r->MarkComplete(0);
  CHECK(got.shards == std::vector<std::uint32_t>{1, 0});
  r->Finish();  // nothing left to signal
  CHECK(got.shards == std::vector<std::uint32_t>{1, 0});
  CHECK_FALSE(r->repeated());
  CHECK_FALSE(r->armed());
}

TEST_CASE("ShardReadiness: Finish signals the shards of parameters that got no gradient", "[worker][readiness]") {
  auto r = *ShardReadiness::Create(Layers(), Shards());
  Signals got;
  r->Arm(got.Callback());
  r->MarkComplete(0);
  r->MarkComplete(1);
  CHECK(got.shards == std::vector<std::uint32_t>{0});
  r->Finish();
  CHECK(got.shards == std::vector<std::uint32_t>{0, 1});
}

TEST_CASE("ShardReadiness: a second mark is reported, Arm starts afresh", "[worker][readiness]") {
  auto r = *ShardReadiness::Create(Layers(), Shards());
  Signals got;
  r->Arm(got.Callback());
  for (std::size_t p : {0, 1, 2, 2}) r->MarkComplete(p);
  CHECK(r->repeated());
  CHECK(got.shards.size() == 2);
  r->Arm(got.Callback());
  CHECK_FALSE(r->repeated());
  for (std::size_t p : {2, 1}) r->MarkComplete(p);
  CHECK(got.shards.size() == 3);
}

TEST_CASE("ShardReadiness: disarmed, marks and Finish signal nothing", "[worker][readiness]") {
  auto r = *ShardReadiness::Create(Layers(), Shards());
  r->MarkComplete(0);  // never armed: a backward outside the loop
  Signals got;
  r->Arm(got.Callback());
  r->Disarm();
  for (std::size_t p : {0, 1, 2, 7}) r->MarkComplete(p);  // 7: out of range, ignored
  r->Finish();
  CHECK(got.shards.empty());
  CHECK_FALSE(r->repeated());
}

TEST_CASE("ShardReadiness: marks from several threads signal each shard once", "[worker][readiness]") {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes;
  for (int i = 0; i < 64; ++i) shapes.push_back({absl::StrCat("p", i), {3}});
  const LayerTable layers = MakeLayerTable(shapes);
  const ShardMap shards = *MakeShardMap(layers, 5);
  auto r = *ShardReadiness::Create(layers, shards);
  Signals got;
  r->Arm(got.Callback());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t p = t; p < 64; p += 4) r->MarkComplete(p);
    });
  }
  for (auto& t : threads) t.join();
  std::sort(got.shards.begin(), got.shards.end());
  CHECK(got.shards == std::vector<std::uint32_t>{0, 1, 2, 3, 4});
  CHECK_FALSE(r->repeated());
}

TEST_CASE("ShardReadiness: an empty model or shard map is refused", "[worker][readiness]") {
  CHECK_FALSE(ShardReadiness::Create(LayerTable{}, Shards()).ok());
  CHECK_FALSE(ShardReadiness::Create(Layers(), ShardMap{}).ok());
}

}  // namespace
}  // namespace sketchps::session
