#include "tools/recovery_watch.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "schemes/recovery_floor.h"

namespace sketchps::tools {
namespace {

// One rank's residual norms in record order, with their rounds.
struct Series {
  std::vector<std::uint64_t> rounds;
  std::vector<double> norms;  // +inf for a norm that is not finite (null in JSON)
};

Series ResidualSeries(const std::vector<nlohmann::json>& records) {
  Series s;
  for (const auto& rec : records) {
    const auto it = rec.find("residual_norm");
    if (it == rec.end()) continue;
    const double norm = it->is_number() ? it->get<double>() : std::numeric_limits<double>::infinity();
    s.rounds.push_back(rec.value("round", std::uint64_t{0}));
    s.norms.push_back(std::isfinite(norm) ? norm : std::numeric_limits<double>::infinity());
  }
  return s;
}

// Mean of norms[first, last); +inf when one is not finite.
double Mean(const std::vector<double>& norms, std::size_t first, std::size_t last) {
  double sum = 0;
  for (std::size_t i = first; i < last; ++i) sum += norms[i];
  return sum / static_cast<double>(last - first);
}

std::optional<ResidualGrowth> RankGrowth(std::uint32_t rank, const Series& s) {
  const std::size_t n = s.norms.size();
  if (n < kMinWatchedRounds) return std::nullopt;
  const std::size_t tenth = n / 10;
  const std::size_t half = n / 2;
  ResidualGrowth g;
  g.rank = rank;
  g.middle_first = s.rounds[half - tenth];
  g.middle_last = s.rounds[half - 1];
  g.end_first = s.rounds[n - tenth];
  g.end_last = s.rounds[n - 1];
  g.middle_norm = Mean(s.norms, half - tenth, half);
  g.end_norm = Mean(s.norms, n - tenth, n);
  for (std::size_t i = half; i < n; ++i) {
    if (!std::isfinite(s.norms[i])) g.end_norm = std::numeric_limits<double>::infinity();
  }
  if (!(g.ratio() > kResidualGrowthLimit)) return std::nullopt;
  return g;
}

std::string Norm(double v) { return std::isfinite(v) ? absl::StrFormat("%.3g", v) : "a non-finite value"; }

}  // namespace

std::optional<ResidualGrowth> FindResidualGrowth(const std::vector<std::vector<nlohmann::json>>& metrics) {
  std::optional<ResidualGrowth> worst;
  for (std::uint32_t rank = 0; rank < metrics.size(); ++rank) {
    auto g = RankGrowth(rank, ResidualSeries(metrics[rank]));
    if (g && (!worst || g->ratio() > worst->ratio())) worst = std::move(g);
  }
  return worst;
}

std::string DescribeResidualGrowth(const ResidualGrowth& g) {
  return absl::StrCat("worker ", g.rank, "'s residual norm grew from ", Norm(g.middle_norm), " (mean of rounds ",
                      g.middle_first, "-", g.middle_last, ") to ", Norm(g.end_norm), " (rounds ", g.end_first, "-",
                      g.end_last,
                      "): the compression returns too little of the gradient for error feedback to converge, and "
                      "training stalls (docs/reports/results.md \"The recovery, observed\"); give the method a larger "
                      "budget: a higher scheme.density, or for the sketches more candidates (scheme.<method>.p2)");
}

nlohmann::json ResidualGrowthJson(const std::optional<ResidualGrowth>& g) {
  if (!g) return nullptr;
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"rank", g->rank},
          {"middle_rounds", {g->middle_first, g->middle_last}},
          {"end_rounds", {g->end_first, g->end_last}},
          {"middle_norm", number(g->middle_norm)},
          {"end_norm", number(g->end_norm)},
          {"ratio", number(g->ratio())},
          {"message", DescribeResidualGrowth(*g)}};
}

std::optional<FloorNotHeld> FindFloorNotHeld(const std::vector<std::vector<nlohmann::json>>& metrics) {
  for (std::uint32_t rank = 0; rank < metrics.size(); ++rank) {
    FloorNotHeld f;
    f.rank = rank;
    for (const nlohmann::json& rec : metrics[rank]) {
      const std::uint32_t shards = rec.value("floor_not_held", 0u);
      if (shards == 0) continue;
      if (f.lines == 0) {
        f.round = rec.value("round", std::uint64_t{0});
        f.shards = shards;
        f.growth = rec.value("floor_growth", 0.0);
      }
      f.lines += shards;
    }
    if (f.lines > 0) return f;
  }
  return std::nullopt;
}

nlohmann::json FloorNotHeldJson(const std::optional<FloorNotHeld>& f, const std::string& scheme) {
  if (!f) return nullptr;
  const std::string message = absl::StrFormat(
      "worker %d: %s: %s, round %d (%d shard(s); %d time(s) in all): the returned mass grew %.2fx in a window at "
      "the budget's most candidates: the sketch recovers too little for error feedback to converge; raise "
      "scheme.%s.budget_factor, or scheme.density",
      f->rank, kFloorNotHeldTag, scheme, f->round, f->shards, f->lines, f->growth, scheme);
  return {{"rank", f->rank}, {"lines", f->lines}, {"round", f->round}, {"message", message}};
}

}  // namespace sketchps::tools
