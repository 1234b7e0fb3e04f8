// Decentralized training keeps every replica bitwise equal after every round (no master copy to
// compare with: the workers compare with each other), for a sum scheme and a gather scheme, with
// two shards run in parallel and a non-power-of-two P, and for gTop-k with the tree merge. The loss
// must also go down.
#include "engine/replica.h"

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include "common/config/config_reader.h"
#include "engine/shard.h"
#include "peer_group.h"
#include "schemes/registry.h"
#include "support/simulation.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

constexpr std::uint64_t kDim = 96;
constexpr std::uint64_t kRounds = 12;

struct Run {
  absl::Status status;
  std::vector<std::uint64_t> checksums;
  std::vector<float> weights;
};

absl::Status Train(std::uint32_t w, std::uint32_t p, const BoundScheme& scheme, const ShardMap& map,
                   const LayerTable& layers, const LeastSquares& problem, PeerGroup& group, Run& out) {
  OptimizerConfig opt;
  opt.lr.base_lr = 0.1;
  opt.momentum = 0.5;
  SKETCHPS_ASSIGN_OR_RETURN(auto replica, Replica::Create({w, p, map, layers, scheme.make, scheme.density,
                                                           scheme.global_momentum, opt, 1, true}));
  kernels::DeviceArray<float> d_w(std::vector<float>(kDim, 0.0f)), d_g(kDim);
  std::vector<float> g;
  for (std::uint64_t round = 0; round < kRounds; ++round) {
    problem.Gradient(d_w.ToHost(), w, p, round, g);
    d_g.FromHost(g);
    SKETCHPS_RETURN_IF_ERROR(replica->RunRound(group.aggregator(w), {round, 0.0}, d_g.data(), d_w.data()).status());
    out.checksums.push_back(Checksum(d_w.ToHost()));
  }
  out.weights = d_w.ToHost();
  return absl::OkStatus();
}

}  // namespace

TEST_CASE("Decentralized replicas stay bitwise equal every round", "[peer][grpc][replica]") {
  const LayerTable layers = MakeLayerTable({{"a", {64}}, {"b", {32}}});
  auto map = MakeShardMap(layers, 2);
  REQUIRE(map.ok());
  const LeastSquares problem(4 * kDim, kDim, 21);
  const std::vector<std::pair<std::string, bool>> cases = {
      {"gs_sgd", false}, {"topk", false}, {"scalecom", false}, {"gtopk", true}};  // gtopk: the tree merge
  for (const auto& [name, tree] : cases) {
    ConfigReader reader(YAML::Load("{name: " + name + ", density: 0.1}"), "scheme");
    auto scheme = ParseSchemeSection(reader);
    REQUIRE(scheme.ok());
    for (std::uint32_t p : {3u, 4u}) {
      PeerGroup group(
          p, PeerBase("replica-" + name, {map->ranges[0].size(), map->ranges[1].size()}, absl::Seconds(20), tree));
      std::vector<Run> runs(p);
      RunRanks(AllRanks(p),
               [&](std::uint32_t w) { runs[w].status = Train(w, p, *scheme, *map, layers, problem, group, runs[w]); });
      for (std::uint32_t w = 0; w < p; ++w) {
        INFO(name << ", P = " << p << ", worker " << w << ": " << runs[w].status);
        REQUIRE(runs[w].status.ok());
        CHECK(runs[w].checksums == runs[0].checksums);
      }
      const double start = problem.Loss(std::vector<float>(kDim, 0.0f));
      INFO(name << ", P = " << p << ": loss " << start << " -> " << problem.Loss(runs[0].weights));
      CHECK(problem.Loss(runs[0].weights) < 0.9 * start);
    }
  }
}
