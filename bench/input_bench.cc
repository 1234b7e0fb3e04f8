#include "bench/input_bench.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <boost/math/special_functions/erf.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/count_sketch_hash.h"
#include "common/fp16.h"
#include "common/layout.h"
#include "common/status.h"
#include "common/wire/gradient_dump.h"
#include "common/wire/layout_proto.h"
#include "kernels/count_sketch.h"
#include "kernels/dgc.h"
#include "kernels/sdagc.h"
#include "kernels/select.h"
#include "kernels/sidco.h"

namespace sketchps::bench {
namespace {

// One round's dumps: the same layout, one per worker.
struct Round {
  std::uint64_t round = 0;
  LayerTable layers;
  std::vector<std::vector<float>> grads;
};

absl::StatusOr<std::vector<Round>> LoadRounds(const std::vector<std::string>& files) {
  std::map<std::uint64_t, Round> rounds;
  for (const auto& f : files) {
    SKETCHPS_ASSIGN_OR_RETURN(GradientDump dump, ReadGradientDump(f));
    Round& r = rounds[dump.round];
    if (r.grads.empty()) {
      r.round = dump.round;
      r.layers = dump.layers;
    } else if (!SameLayers(r.layers, dump.layers)) {
      return absl::InvalidArgumentError(
          absl::StrCat(f, ": its layout differs from the other dumps of round ", dump.round));
    }
    r.grads.push_back(std::move(dump.values));
  }
  std::vector<Round> out;
  for (auto& [round, r] : rounds) out.push_back(std::move(r));
  return out;
}

struct Device {
  kernels::Scratch scratch;
  kernels::Exec exec{nullptr, &scratch};
};

absl::StatusOr<double> Density(Device& dev, const std::string& method, const std::vector<float>& x, double density,
                               const LayerTable& layers) {
  const std::size_t n = x.size();
  kernels::DeviceArray<float> d_x(x);
  kernels::DeviceArray<std::uint32_t> idx(n);
  kernels::DeviceArray<float> val(n);
  std::size_t count = 0;
  if (method == "topk") {
    SKETCHPS_ASSIGN_OR_RETURN(
        count, kernels::TopK(d_x.data(), n, std::max<std::size_t>(1, density * n), idx.data(), val.data(), dev.exec));
  } else if (method == "dgc") {
    kernels::DgcSelectOptions o;
    o.compress_ratio = density;
    SKETCHPS_ASSIGN_OR_RETURN(auto sel, kernels::DgcSelect(d_x.data(), n, o, 1, idx.data(), val.data(), n, dev.exec));
    count = sel.count;
  } else if (method == "sdagc") {
    const double lambda = std::sqrt(2.0) * boost::math::erfc_inv(density);
    std::vector<kernels::Segment> segments;
    for (const auto& l : layers.layers) segments.push_back({l.offset, l.numel});
    SKETCHPS_ASSIGN_OR_RETURN(auto tau, kernels::SdagcThresholds(d_x.data(), n, segments, lambda, dev.exec));
    std::vector<kernels::ThresholdSegment> with_tau;
    for (std::size_t i = 0; i < segments.size(); ++i)
      with_tau.push_back({segments[i].offset, segments[i].size, tau[i]});
    SKETCHPS_ASSIGN_OR_RETURN(
        count, kernels::ThresholdSelectSegments(d_x.data(), n, with_tau, n, idx.data(), val.data(), dev.exec));
  } else {
    kernels::SidcoOptions o;
    o.variant = method == "sidco_e"   ? kernels::SidcoVariant::kExponential
                : method == "sidco_p" ? kernels::SidcoVariant::kGeneralizedPareto
                                      : kernels::SidcoVariant::kGammaGeneralizedPareto;
    o.density = density;
    o.stage_mode = kernels::SidcoStageMode::kFixed;
    o.stages = method == "sidco_e" ? 1 : 2;
    SKETCHPS_ASSIGN_OR_RETURN(auto estimator, kernels::SidcoEstimator::Create(o));
    SKETCHPS_ASSIGN_OR_RETURN(auto estimate, estimator.Estimate(d_x.data(), n, dev.exec));
    SKETCHPS_ASSIGN_OR_RETURN(
        count, kernels::ThresholdSelect(d_x.data(), n, estimate.threshold, n, idx.data(), val.data(), dev.exec));
  }
  return static_cast<double>(count) / static_cast<double>(n);
}

// Index-sorted top-k positions of x by magnitude (the kernels' order: ties by smaller index).
absl::StatusOr<std::vector<std::uint32_t>> TopIndices(Device& dev, const std::vector<float>& x, std::size_t k) {
  kernels::DeviceArray<float> d_x(x);
  kernels::DeviceArray<std::uint32_t> idx(k);
  kernels::DeviceArray<float> val(k);
  SKETCHPS_ASSIGN_OR_RETURN(std::size_t count,
                            kernels::TopK(d_x.data(), x.size(), k, idx.data(), val.data(), dev.exec));
  std::vector<std::uint32_t> out = idx.ToHost(count);
  std::sort(out.begin(), out.end());
  return out;
}

// The K candidates of the summed f16-rounded sketches of `xs`, index-sorted.
absl::StatusOr<std::vector<std::uint32_t>> Candidates(Device& dev, const std::vector<std::vector<float>>& xs,
                                                      const CountSketchHash& hash, std::size_t candidates) {
  const std::size_t n = xs.front().size();
  kernels::DeviceArray<float> sum(hash.cells()), one(hash.cells()), d_x(n);
  sum.Zero();
  for (const auto& x : xs) {
    d_x.FromHost(x);
    one.Zero();
    SKETCHPS_RETURN_IF_ERROR(kernels::SketchAccumulate(d_x.data(), n, hash, one.data(), dev.exec));
    std::vector<float> table = one.ToHost();
    for (float& v : table) {
      if (std::fabs(v) <= kHalfMax) v = HalfBitsToFloat(FloatToHalfBits(v));  // what table: f16 sends
    }
    one.FromHost(table);
    SKETCHPS_RETURN_IF_ERROR(kernels::SketchMerge(sum.data(), one.data(), hash.cells(), dev.exec));
  }
  kernels::DeviceArray<std::uint32_t> idx(candidates);
  kernels::DeviceArray<float> est(candidates);
  SKETCHPS_ASSIGN_OR_RETURN(std::size_t count,
                            kernels::SketchRecover(sum.data(), hash, n, candidates, idx.data(), est.data(), dev.exec));
  std::vector<std::uint32_t> out = idx.ToHost(count);
  std::sort(out.begin(), out.end());
  return out;
}

double SumSquares(const std::vector<float>& x, const std::vector<std::uint32_t>& at) {
  double s = 0;
  for (auto i : at) s += double{x[i]} * x[i];
  return s;
}

std::size_t Overlap(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
  std::vector<std::uint32_t> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  return both.size();
}

absl::Status MeasureRecall(Device& dev, const InputOptions& o, std::uint64_t round, std::uint32_t shard,
                           const std::vector<std::vector<float>>& xs, std::vector<RecallRow>& out) {
  const std::size_t n = xs.front().size();
  std::vector<float> sum(n, 0.0f);
  for (const auto& x : xs) {
    for (std::size_t i = 0; i < n; ++i) sum[i] += x[i];
  }
  const std::size_t k = std::max<std::size_t>(1, static_cast<std::size_t>(o.density * static_cast<double>(n)));
  SKETCHPS_ASSIGN_OR_RETURN(const auto truth, TopIndices(dev, sum, k));
  for (std::uint32_t rows : o.rows) {
    for (double cf : o.cols_factors) {
      const auto cols = static_cast<std::uint32_t>(std::max(1.0, std::ceil(cf * static_cast<double>(k))));
      SKETCHPS_ASSIGN_OR_RETURN(auto hash, CountSketchHash::Create({rows, cols, SketchSeed(o.seed, shard), n}));
      for (std::uint32_t p2 : o.p2s) {
        const std::size_t K = std::min<std::size_t>(n, std::size_t{p2} * k);
        SKETCHPS_ASSIGN_OR_RETURN(const auto cand, Candidates(dev, xs, hash, K));
        SKETCHPS_ASSIGN_OR_RETURN(const auto best, TopIndices(dev, sum, K));
        const double best_energy = SumSquares(sum, best);
        out.push_back(RecallRow{round, shard, static_cast<std::uint32_t>(xs.size()), rows, cf, p2, k, K,
                                static_cast<double>(hash.cells()) / static_cast<double>(n),
                                static_cast<double>(Overlap(truth, cand)) / static_cast<double>(k),
                                best_energy > 0 ? SumSquares(sum, cand) / best_energy : 1.0, 2 * hash.cells() + 4 * K});
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOptions(const InputOptions& o) {
  if (o.files.empty()) return absl::InvalidArgumentError("--input: no gradient dump given");
  if (!(o.density > 0 && o.density <= 1)) return absl::InvalidArgumentError("--density: must be in (0, 1]");
  if (o.servers < 1) return absl::InvalidArgumentError("--servers: must be >= 1");
  if (o.rows.empty() || o.cols_factors.empty() || o.p2s.empty()) {
    return absl::InvalidArgumentError("--rows / --cols-factors / --p2: each needs at least one value");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<InputReport> RunInputBenchmarks(const InputOptions& o,
                                               const std::function<void(const std::string&)>& progress) {
  SKETCHPS_RETURN_IF_ERROR(CheckOptions(o));
  SKETCHPS_ASSIGN_OR_RETURN(const auto rounds, LoadRounds(o.files));
  Device dev;
  InputReport report;
  static const char* kMethods[] = {"topk", "dgc", "sidco_e", "sidco_p", "sidco_gp", "sdagc"};
  for (const auto& r : rounds) {
    SKETCHPS_ASSIGN_OR_RETURN(ShardMap map, MakeShardMap(r.layers, o.servers));
    for (std::uint32_t s = 0; s < map.ranges.size(); ++s) {
      const auto& range = map.ranges[s];
      if (progress)
        progress(absl::StrCat("round ", r.round, ", shard ", s, ": ", r.grads.size(), " workers, ", range.size(),
                              " entries"));
      std::vector<std::vector<float>> xs;
      for (const auto& g : r.grads) xs.emplace_back(g.begin() + range.lo, g.begin() + range.hi);
      const LayerTable layers = ClipLayers(r.layers, range.lo, range.hi);
      for (const char* method : kMethods) {
        double achieved = 0;
        for (const auto& x : xs) {
          SKETCHPS_ASSIGN_OR_RETURN(double d, Density(dev, method, x, o.density, layers));
          achieved += d / static_cast<double>(xs.size());
        }
        report.selection.push_back(SelectionRow{r.round, s, method, o.density, achieved});
      }
      SKETCHPS_RETURN_IF_ERROR(MeasureRecall(dev, o, r.round, s, xs, report.recall));
    }
  }
  return report;
}

std::string InputReportMarkdown(const InputReport& report) {
  std::map<std::string, std::pair<double, int>> density;
  std::vector<std::string> methods;
  for (const auto& row : report.selection) {
    auto [it, fresh] = density.try_emplace(row.method, 0.0, 0);
    if (fresh) methods.push_back(row.method);
    it->second.first += row.density_achieved;
    ++it->second.second;
  }
  std::string out = "| method | target density | achieved density (mean) |\n|---|---|---|\n";
  for (const auto& m : methods) {
    out += absl::StrFormat("| %s | %g | %.5f |\n", m, report.selection.front().density_target,
                           density[m].first / density[m].second);
  }
  std::map<std::tuple<std::uint32_t, double, std::uint32_t>, std::vector<const RecallRow*>> by_config;
  for (const auto& row : report.recall) by_config[{row.rows, row.cols_factor, row.p2}].push_back(&row);
  out +=
      "\n| rows | cols | candidates | cells / element | recall of top-k | energy of the top-K | up bytes per worker "
      "per shard |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const auto& [config, rows] : by_config) {
    double recall = 0, energy = 0, cells = 0, bytes = 0;
    for (const auto* r : rows) {
      recall += r->recall / rows.size();
      energy += r->energy / rows.size();
      cells += r->cells_per_element / rows.size();
      bytes += static_cast<double>(r->up_bytes) / rows.size();
    }
    out += absl::StrFormat("| %u | %gk | %uk | %.3f | %.2f | %.2f | %.0f |\n", std::get<0>(config), std::get<1>(config),
                           std::get<2>(config), cells, recall, energy, bytes);
  }
  return out;
}

}  // namespace sketchps::bench
