// gs-SGD in decentralized mode: the bytes each worker sends per round are the sketch size times
// log2 P plus the value round (p2 * k floats) times log2 P, measured with the peer aggregator's
// counters over real gRPC for P = 2, 4, 8.
#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include "common/config/config_reader.h"
#include "engine/replica.h"
#include "engine/shard.h"
#include "peer_group.h"
#include "schemes/registry.h"
#include "support/simulation.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

constexpr std::uint64_t kDim = 512;
constexpr std::uint64_t kRounds = 3;
// density 0.05 -> k = 25; c = 10 k = 250 columns, r = 5 rows; p2 = 2 -> 50 candidate values.
constexpr std::uint64_t kSketchBytes = 5 * 250 * 4;
constexpr std::uint64_t kValueBytes = 2 * 25 * 4;

struct Measured {
  absl::Status status;
  std::vector<peer::PeerCounters> per_round;  // counter deltas of each round
  std::vector<std::uint64_t> payload_up;      // RoundTraffic.bytes_up: this worker's own payloads
};

peer::PeerCounters Delta(const peer::PeerCounters& now, const peer::PeerCounters& before) {
  peer::PeerCounters d;
  d.wire_up = now.wire_up - before.wire_up;
  d.wire_down = now.wire_down - before.wire_down;
  d.raw_up = now.raw_up - before.raw_up;
  d.raw_down = now.raw_down - before.raw_down;
  d.messages = now.messages - before.messages;
  return d;
}

absl::Status Train(std::uint32_t w, std::uint32_t p, const BoundScheme& scheme, PeerGroup& group, Measured& out) {
  const LayerTable layers = MakeLayerTable({{"w", {static_cast<std::int64_t>(kDim)}}});
  SKETCHPS_ASSIGN_OR_RETURN(ShardMap map, MakeShardMap(layers, 1));
  OptimizerConfig opt;
  opt.lr.base_lr = 0.05;
  SKETCHPS_ASSIGN_OR_RETURN(auto replica, Replica::Create({w, p, map, layers, scheme.make, scheme.density,
                                                           scheme.global_momentum, opt, 5, true}));
  const LeastSquares problem(2 * kDim, kDim, 9, /*batch=*/8);
  kernels::DeviceArray<float> d_w(std::vector<float>(kDim, 0.0f)), d_g(kDim);
  std::vector<float> g;
  for (std::uint64_t round = 0; round < kRounds; ++round) {
    problem.Gradient(d_w.ToHost(), w, p, round, g);
    d_g.FromHost(g);
    const auto before = group.aggregator(w).counters();
    SKETCHPS_ASSIGN_OR_RETURN(ReplicaRound r,
                              replica->RunRound(group.aggregator(w), {round, 0.0}, d_g.data(), d_w.data()));
    out.per_round.push_back(Delta(group.aggregator(w).counters(), before));
    out.payload_up.push_back(r.traffic.bytes_up);
  }
  return absl::OkStatus();
}

}  // namespace

TEST_CASE("gs-SGD decentralized: bytes per worker per round = (sketch + values) x log2 P", "[peer][grpc][bytes]") {
  ConfigReader reader(
      YAML::Load("{name: gs_sgd, density: 0.05, gs_sgd: {rows: 5, cols_factor: 10, p2: 2, keep: top_k, table: f32}}"),
      "scheme");
  auto scheme = ParseSchemeSection(reader);
  REQUIRE(scheme.ok());
  for (std::uint32_t p : {2u, 4u, 8u}) {
    const std::uint64_t log2p = p == 2 ? 1 : p == 4 ? 2 : 3;
    PeerGroup group(p, PeerBase("bytes", {kDim}));
    std::vector<Measured> measured(p);
    RunRanks(AllRanks(p), [&](std::uint32_t w) { measured[w].status = Train(w, p, *scheme, group, measured[w]); });
    for (std::uint32_t w = 0; w < p; ++w) {
      REQUIRE(measured[w].status.ok());
      for (std::uint64_t round = 0; round < kRounds; ++round) {
        const auto& c = measured[w].per_round[round];
        INFO("P = " << p << ", worker " << w << ", round " << round << ": raw up " << c.raw_up << ", wire up "
                    << c.wire_up << ", raw down " << c.raw_down << ", messages " << c.messages);
        CHECK(measured[w].payload_up[round] == kSketchBytes + kValueBytes);
        CHECK(c.raw_up == log2p * (kSketchBytes + kValueBytes));
        CHECK(c.raw_down == c.raw_up);
        CHECK(c.messages == 2 * log2p);
        CHECK(c.wire_up >= c.raw_up);
        CHECK(c.wire_up <= c.raw_up + 120 * c.messages);  // header, spec, item framing
      }
    }
  }
}
