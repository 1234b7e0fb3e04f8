// Every scheme, P = 2..5, two shards: the peer aggregator over real gRPC gives the aggregates of the
// parameter server (InProcessHub, the PS reference) on the same gradients, round after round.
//
// Each worker thread drives two replicas with identical gradients (LeastSquares at the PS replica's
// weights): one through the hub, one through its PeerAggregator. Equal aggregates give equal
// weights, so the weights are compared after every round:
//   - bitwise when P = 2 or the scheme's phases are all all-gathers / leader broadcasts;
//   - otherwise (a dense or sketch all-reduce: pairwise instead of worker-order summation) within a
//     relative difference of 1e-5.
// Peer replicas must also be bitwise equal to each other after every round.
#include <set>

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include "common/config/config_reader.h"
#include "engine/in_process.h"
#include "engine/replica.h"
#include "engine/shard.h"
#include "peer_group.h"
#include "schemes/registry.h"
#include "support/simulation.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

constexpr std::uint64_t kDim = 120;
constexpr std::uint64_t kRounds = 4;

// Forwards to another aggregator and records the reductions it saw.
class Recording final : public Aggregator {
 public:
  explicit Recording(Aggregator& inner) : inner_(inner) {}
  absl::StatusOr<std::shared_ptr<const PhaseResult>> RunPhase(std::uint32_t shard, std::uint64_t round,
                                                              std::uint32_t phase, Contribution c) override {
    {
      absl::MutexLock lock(&mu_);
      seen_.insert(c.spec.reduction);
    }
    return inner_.RunPhase(shard, round, phase, std::move(c));
  }
  std::uint32_t worker_id() const override { return inner_.worker_id(); }
  std::uint32_t num_workers() const override { return inner_.num_workers(); }
  std::set<Reduction> seen() const {
    absl::MutexLock lock(&mu_);
    return seen_;
  }

 private:
  Aggregator& inner_;
  mutable absl::Mutex mu_;
  std::set<Reduction> seen_;
};

struct WorkerTrace {
  absl::Status status;
  std::vector<std::vector<float>> ps, peer;  // weights after each round
  std::set<Reduction> reductions;
};

BoundScheme Bind(const std::string& name) {
  ConfigReader reader(YAML::Load("{name: " + name + ", density: 0.1}"), "scheme");
  auto bound = ParseSchemeSection(reader);
  REQUIRE(bound.ok());
  return *bound;
}

absl::Status RunWorker(std::uint32_t w, std::uint32_t p, const BoundScheme& scheme, const ShardMap& map,
                       const LayerTable& layers, const OptimizerConfig& opt, InProcessHub& hub, PeerGroup& group,
                       const LeastSquares& problem, WorkerTrace& trace) {
  auto ps_agg = hub.MakeAggregator(w, absl::Seconds(30));
  Recording peer_agg(group.aggregator(w));
  const ReplicaOptions ro{w, p, map, layers, scheme.make, scheme.density, scheme.global_momentum, opt, 11, true};
  SKETCHPS_ASSIGN_OR_RETURN(auto ps_replica, Replica::Create(ro));
  SKETCHPS_ASSIGN_OR_RETURN(auto peer_replica, Replica::Create(ro));
  kernels::DeviceArray<float> d_ps(std::vector<float>(kDim, 0.0f)), d_peer(std::vector<float>(kDim, 0.0f)), d_g(kDim);
  std::vector<float> g;
  for (std::uint64_t round = 0; round < kRounds; ++round) {
    problem.Gradient(d_ps.ToHost(), w, p, round, g);
    d_g.FromHost(g);
    const RoundInfo info{round, EpochOfRound(round, 10)};
    SKETCHPS_RETURN_IF_ERROR(ps_replica->RunRound(*ps_agg, info, d_g.data(), d_ps.data()).status());
    SKETCHPS_RETURN_IF_ERROR(peer_replica->RunRound(peer_agg, info, d_g.data(), d_peer.data()).status());
    trace.ps.push_back(d_ps.ToHost());
    trace.peer.push_back(d_peer.ToHost());
  }
  trace.reductions = peer_agg.seen();
  return absl::OkStatus();
}

}  // namespace

TEST_CASE("Every scheme: peer aggregates equal the parameter server's for P = 2..5", "[peer][grpc][schemes]") {
  const LayerTable layers = MakeLayerTable({{"a", {80}}, {"b", {40}}});
  auto map = MakeShardMap(layers, 2);
  REQUIRE(map.ok());
  std::vector<std::uint64_t> ranges;
  for (const auto& r : map->ranges) ranges.push_back(r.size());
  OptimizerConfig opt;
  opt.lr.base_lr = 0.05;
  opt.momentum = 0.5;
  const LeastSquares problem(4 * kDim, kDim, 3, /*batch=*/16);
  for (const auto& name : SchemeNames()) {
    const BoundScheme scheme = Bind(name);
    for (std::uint32_t p = 2; p <= 5; ++p) {
      InProcessHub hub(p, *map, std::vector<float>(kDim, 0.0f), opt, scheme.global_momentum, 10);
      PeerGroup group(p, PeerBase("eq-" + name, ranges));
      std::vector<WorkerTrace> traces(p);
      RunRanks(AllRanks(p), [&](std::uint32_t w) {
        traces[w].status = RunWorker(w, p, scheme, *map, layers, opt, hub, group, problem, traces[w]);
      });
      const auto& seen = traces[0].reductions;
      const bool bitwise =
          p == 2 || (seen.count(Reduction::kDenseSum) == 0 && seen.count(Reduction::kSketchRecover) == 0 &&
                     seen.count(Reduction::kSketchMomentumError) == 0);
      for (std::uint32_t w = 0; w < p; ++w) {
        INFO(name << ", P = " << p << ", worker " << w << ": " << traces[w].status);
        REQUIRE(traces[w].status.ok());
        REQUIRE(traces[w].peer.size() == kRounds);
        for (std::uint64_t round = 0; round < kRounds; ++round) {
          INFO("round " << round << (bitwise ? " (bitwise)" : " (tolerance)"));
          CHECK(traces[w].peer[round] == traces[0].peer[round]);
          if (bitwise) {
            CHECK(traces[w].peer[round] == traces[w].ps[round]);
          } else {
            CHECK(RelativeError(traces[w].peer[round], traces[w].ps[round]) <= 1e-5);
          }
        }
      }
    }
  }
}
