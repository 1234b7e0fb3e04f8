#include "bench/loadgen/calibrate.h"

#include <cstdio>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "bench/loadgen/gradient_dumps.h"
#include "bench/loadgen/synth.h"
#include "common/status.h"
#include "job/model_layout.h"

namespace sketchps::bench {
namespace {

constexpr std::uint32_t kWorkers = 4;

// {"rounds": [{round, shards: [{union, k, union_over_k}]}], "union_over_k_mean"} of the dumps.
nlohmann::json RealUnions(const LoadedGradients& dumps, const ShardMap& shards, double density) {
  std::map<std::uint64_t, std::vector<std::vector<float>>> by_round;
  for (std::size_t i = 0; i < dumps.gradients.size(); ++i)
    by_round[dumps.origin[i].first].push_back(dumps.gradients[i]);
  nlohmann::json rounds = nlohmann::json::array();
  double sum = 0;
  int n = 0;
  for (auto& [round, grads] : by_round) {
    if (grads.size() < kWorkers) continue;
    grads.resize(kWorkers);
    const auto unions = TopKUnionPerShard(grads, shards, density);
    nlohmann::json per_shard = nlohmann::json::array();
    for (std::size_t s = 0; s < unions.size(); ++s) {
      const double k = static_cast<double>(KOfRange(density, shards.ranges[s].size()));
      per_shard.push_back({{"union", unions[s]}, {"k", k}, {"union_over_k", unions[s] / k}});
      sum += unions[s] / k;
      ++n;
    }
    rounds.push_back({{"round", round}, {"shards", per_shard}});
  }
  nlohmann::json out{{"rounds", rounds}};
  if (n > 0) out["union_over_k_mean"] = sum / n;
  return out;
}

void PrintTable(const nlohmann::json& out, const LoadgenOptions& o) {
  if (out.contains("real")) {
    std::cout << "real gradients (" << o.gradients_dir << "), union of " << kWorkers << " workers' top-k per shard:\n";
    for (const auto& r : out["real"]["rounds"]) {
      std::cout << "  round " << r["round"];
      for (const auto& s : r["shards"]) {
        std::cout << absl::StrFormat("  %d (%.2f k)", s["union"].get<std::uint64_t>(), s["union_over_k"].get<double>());
      }
      std::cout << "\n";
    }
  }
  std::cout << "synthetic, union / k per shard at P = 4, density " << o.density << ":\n";
  for (const auto& p : out["synthetic"]) {
    std::cout << absl::StrFormat("  correlation %.1f: %.3f\n", p["correlation"].get<double>(),
                                 p["union_over_k"].get<double>());
  }
  std::cout << absl::StrFormat("target %.3f k: correlation %.3f\n", out["target_union_over_k"].get<double>(),
                               out["calibrated_correlation"].get<double>());
}

absl::StatusOr<nlohmann::json> Calibrate(const LoadgenOptions& o) {
  SKETCHPS_ASSIGN_OR_RETURN(LayerTable layers, ModelLayout(o.model));
  nlohmann::json out{{"density", o.density}, {"workers", kWorkers}, {"servers", o.servers}, {"model", o.model}};
  double target = kCalibrationUnionOverK;
  if (!o.gradients_dir.empty()) {
    SKETCHPS_ASSIGN_OR_RETURN(const LoadedGradients dumps, LoadGradientDumps(o.gradients_dir));
    layers = dumps.layers;
    SKETCHPS_ASSIGN_OR_RETURN(const ShardMap real_shards, MakeShardMap(layers, o.servers));
    out["real"] = RealUnions(dumps, real_shards, o.density);
    out["real"]["dir"] = o.gradients_dir;
    if (out["real"].contains("union_over_k_mean")) target = out["real"]["union_over_k_mean"].get<double>();
  }
  SKETCHPS_ASSIGN_OR_RETURN(const ShardMap shards, MakeShardMap(layers, o.servers));
  std::vector<double> grid;
  for (int i = 0; i <= 10; ++i) grid.push_back(i / 10.0);
  nlohmann::json curve = nlohmann::json::array();
  for (const auto& p : UnionCurve(grid, shards, kWorkers, o.density, o.seed, 3)) {
    curve.push_back({{"correlation", p.correlation}, {"union_over_k", p.union_over_k}});
  }
  out["synthetic"] = curve;
  out["target_union_over_k"] = target;
  out["calibrated_correlation"] = CalibrateCorrelation(target, shards, kWorkers, o.density, o.seed, 3);
  return out;
}

}  // namespace

int RunCalibrate(const LoadgenOptions& options) {
  auto out = Calibrate(options);
  if (!out.ok()) {
    std::fprintf(stderr, "sketchps loadgen: %s\n", std::string(out.status().message()).c_str());
    return 2;
  }
  if (options.json) {
    std::cout << out->dump(2) << "\n";
  } else {
    PrintTable(*out, options);
  }
  return 0;
}

}  // namespace sketchps::bench
