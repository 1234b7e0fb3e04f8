// The primitives `sketchps bench` times, one Method each (see workspace.h). Where a method has
// settings the issue leaves open, they are stated here and in docs/reports/benchmarks.md.
#include <cmath>
#include <cstdint>

#include <boost/math/special_functions/erf.hpp>

#include "bench/workspace.h"
#include "common/status.h"
#include "kernels/count_sketch.h"
#include "kernels/dgc.h"
#include "kernels/sdagc.h"
#include "kernels/select.h"
#include "kernels/sidco.h"

namespace sketchps::bench {
namespace {

constexpr std::uint64_t kPairBytes = sizeof(std::uint32_t) + sizeof(float);
constexpr std::uint64_t kSdagcLayers = 100;  // a model-like layer table: 100 equal layers

Outcome Selection(std::uint64_t count) { return Outcome{count, count * kPairBytes}; }
std::uint64_t TableBytes(const Workspace& ws) { return ws.hash.cells() * sizeof(float); }

absl::Status CheckSketch(const Workspace& ws) {
  if (ws.hash.rows() == 0) return absl::InvalidArgumentError("--sketch-cols: invalid Count Sketch shape");
  return absl::OkStatus();
}

absl::Status ZeroTable(Workspace& ws) {
  SKETCHPS_RETURN_IF_ERROR(CheckSketch(ws));
  ws.table.Zero();
  return absl::OkStatus();
}

absl::Status FillTables(Workspace& ws) {
  SKETCHPS_RETURN_IF_ERROR(ZeroTable(ws));
  SKETCHPS_RETURN_IF_ERROR(kernels::SketchAccumulate(ws.grad.data(), ws.d, ws.hash, ws.table.data(), ws.exec));
  kernels::Synchronize(ws.exec);
  kernels::CopyToDevice(ws.other_table.data(), ws.table.ToHost().data(), TableBytes(ws));
  return absl::OkStatus();
}

absl::StatusOr<Outcome> RunAccumulate(Workspace& ws) {
  SKETCHPS_RETURN_IF_ERROR(kernels::SketchAccumulate(ws.grad.data(), ws.d, ws.hash, ws.table.data(), ws.exec));
  return Outcome{0, TableBytes(ws)};
}

absl::StatusOr<Outcome> RunMerge(Workspace& ws) {
  SKETCHPS_RETURN_IF_ERROR(kernels::SketchMerge(ws.table.data(), ws.other_table.data(), ws.hash.cells(), ws.exec));
  return Outcome{0, TableBytes(ws)};
}

absl::StatusOr<Outcome> RunRecover(Workspace& ws) {
  SKETCHPS_ASSIGN_OR_RETURN(auto count, kernels::SketchRecover(ws.table.data(), ws.hash, ws.d, ws.k, ws.out_idx.data(),
                                                               ws.out_val.data(), ws.exec));
  return Selection(count);
}

absl::StatusOr<Outcome> RunTopK(Workspace& ws) {
  SKETCHPS_ASSIGN_OR_RETURN(auto count,
                            kernels::TopK(ws.grad.data(), ws.d, ws.k, ws.out_idx.data(), ws.out_val.data(), ws.exec));
  return Selection(count);
}

absl::StatusOr<Outcome> RunDgc(Workspace& ws) {
  kernels::DgcSelectOptions options;
  options.compress_ratio = ws.options.density;
  SKETCHPS_ASSIGN_OR_RETURN(auto sel, kernels::DgcSelect(ws.grad.data(), ws.d, options, ws.options.seed,
                                                         ws.out_idx.data(), ws.out_val.data(), ws.d, ws.exec));
  return Selection(sel.count);
}

// One SIDCo estimate with a fixed stage count, then the threshold selection.
absl::StatusOr<Outcome> RunSidco(Workspace& ws, kernels::SidcoVariant variant, int stages) {
  kernels::SidcoOptions options;
  options.variant = variant;
  options.density = ws.options.density;
  options.stage_mode = kernels::SidcoStageMode::kFixed;
  options.stages = stages;
  SKETCHPS_ASSIGN_OR_RETURN(auto estimator, kernels::SidcoEstimator::Create(options));
  SKETCHPS_ASSIGN_OR_RETURN(auto estimate, estimator.Estimate(ws.grad.data(), ws.d, ws.exec));
  SKETCHPS_ASSIGN_OR_RETURN(auto count, kernels::ThresholdSelect(ws.grad.data(), ws.d, estimate.threshold, ws.d,
                                                                 ws.out_idx.data(), ws.out_val.data(), ws.exec));
  return Selection(count);
}

// SDAGC over 100 equal layers: per-layer thresholds lambda * sigma_l, then per-layer selection.
// lambda = sqrt(2) * erfc^-1(density) makes a Gaussian layer hit the target density.
absl::StatusOr<Outcome> RunSdagc(Workspace& ws) {
  std::vector<kernels::Segment> layers;
  for (std::uint64_t l = 0; l < kSdagcLayers; ++l) {
    layers.push_back({ws.d * l / kSdagcLayers, ws.d * (l + 1) / kSdagcLayers - ws.d * l / kSdagcLayers});
  }
  const double lambda = std::sqrt(2.0) * boost::math::erfc_inv(ws.options.density);
  SKETCHPS_ASSIGN_OR_RETURN(auto tau, kernels::SdagcThresholds(ws.grad.data(), ws.d, layers, lambda, ws.exec));
  std::vector<kernels::ThresholdSegment> segments;
  for (std::size_t l = 0; l < layers.size(); ++l) segments.push_back({layers[l].offset, layers[l].size, tau[l]});
  SKETCHPS_ASSIGN_OR_RETURN(auto total,
                            kernels::ThresholdSelectSegments(ws.grad.data(), ws.d, segments, ws.d, ws.out_idx.data(),
                                                             ws.out_val.data(), ws.exec));
  return Selection(total);
}

}  // namespace

const std::vector<Method>& Methods() {
  using kernels::SidcoVariant;
  static const std::vector<Method> methods = {
      {"sketch_accumulate", ZeroTable, RunAccumulate},
      {"sketch_merge", FillTables, RunMerge},
      {"sketch_recover", FillTables, RunRecover},
      {"topk", nullptr, RunTopK},
      {"dgc", nullptr, RunDgc},
      {"sidco_e", nullptr, [](Workspace& ws) { return RunSidco(ws, SidcoVariant::kExponential, 1); }},
      {"sidco_p", nullptr, [](Workspace& ws) { return RunSidco(ws, SidcoVariant::kGeneralizedPareto, 2); }},
      {"sidco_gp", nullptr, [](Workspace& ws) { return RunSidco(ws, SidcoVariant::kGammaGeneralizedPareto, 2); }},
      {"sdagc", nullptr, RunSdagc},
  };
  return methods;
}

}  // namespace sketchps::bench
