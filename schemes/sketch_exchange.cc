#include "schemes/sketch_exchange.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/fp16.h"
#include "common/status.h"
#include "kernels/count_sketch.h"
#include "kernels/sparse.h"
#include "spdlog/spdlog.h"

namespace sketchps {
namespace {

constexpr std::uint32_t kMaxP2 = 1024;
constexpr double kMaxBudgetFactor = 1024;

absl::Status KeyError(const std::string& prefix, const char* key, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(prefix, ".", key, ": ", what));
}

CandidatePlan PlanOf(const SketchSizing& sizing, std::uint64_t k, std::uint64_t dim, ValueEncoding values) {
  CandidatePlan plan;
  plan.dim = dim;
  plan.configured = SketchKeep(std::uint64_t{sizing.p2} * k, dim);
  const std::uint64_t cells = std::uint64_t{sizing.rows} * sizing.ColsFor(k, dim);
  plan.table_bytes = cells * (sizing.table == SketchSizing::Table::kF16 ? 2 : 4);
  plan.value_bytes = values == ValueEncoding::kF32 ? 4 : 2;  // the candidates' exact values (phase 1)
  plan.budget_factor = sizing.budget_factor;
  plan.floor = sizing.recovery_floor;
  plan.window = sizing.adapt_window;
  return plan;
}

}  // namespace

std::uint64_t SketchKeep(std::uint64_t k, std::uint64_t dim) { return std::max<std::uint64_t>(1, std::min(k, dim)); }

std::string SketchSizing::ElasticRefusal(const ConfigReader& section) const {
  if (budget_factor == 1.0 && recovery_floor == 0.0) return "";
  return absl::StrCat(section.KeyPath(budget_factor != 1.0 ? "budget_factor" : "recovery_floor"),
                      " adapts the candidates from every round's G_t, which a worker joining mid-job has not seen");
}

absl::Status SketchSizing::Validate(const std::string& prefix) const {
  if (rows < 1 || rows > kMaxSketchRows) {
    return KeyError(prefix, "rows", absl::StrCat("must be in [1, ", kMaxSketchRows, "], got ", rows));
  }
  if (!(std::isfinite(cols_factor) && cols_factor > 0.0)) {
    return KeyError(prefix, "cols_factor", absl::StrCat("must be a finite number > 0, got ", cols_factor));
  }
  if (cols > std::numeric_limits<std::uint32_t>::max() || std::uint64_t{rows} * cols > kMaxSketchCells) {
    return KeyError(
        prefix, "cols",
        absl::StrCat(cols, " columns with ", rows, " rows exceed the ", kMaxSketchCells, "-cell table limit"));
  }
  if (p2 > kMaxP2) return KeyError(prefix, "p2", absl::StrCat("must be in [0, ", kMaxP2, "], got ", p2));
  if (!(std::isfinite(budget_factor) && budget_factor >= 1.0 && budget_factor <= kMaxBudgetFactor)) {
    return KeyError(
        prefix, "budget_factor",
        absl::StrCat("must be in [1, ", kMaxBudgetFactor,
                     "] (the uplink bytes a round may spend, as a multiple of the sizing's), got ", budget_factor));
  }
  if (!(std::isfinite(recovery_floor) && recovery_floor >= 0.0 && recovery_floor <= 1.0)) {
    return KeyError(
        prefix, "recovery_floor",
        absl::StrCat("must be in [0, 1] (the candidates' share of a shard; 0: none), got ", recovery_floor));
  }
  if (adapt_window < 1) return KeyError(prefix, "adapt_window", "must be at least 1 round");
  if (p2 == 0 && (budget_factor > 1.0 || recovery_floor > 0.0)) {
    return KeyError(prefix, budget_factor > 1.0 ? "budget_factor" : "recovery_floor",
                    "adapts the candidates of the second phase: needs p2 > 0 (p2 is 0: one phase, no candidates)");
  }
  return absl::OkStatus();
}

absl::Status SketchSizing::ReadFields(ConfigReader& section) {
  std::string keep_name = keep == Keep::kTopK ? "top_k" : "candidates";
  std::string table_name = table == Table::kF32 ? "f32" : "f16";
  SKETCHPS_RETURN_IF_ERROR(section.GetAll("rows", rows, "cols_factor", cols_factor, "cols", cols, "p2", p2, "keep",
                                          keep_name, "table", table_name, "budget_factor", budget_factor,
                                          "recovery_floor", recovery_floor, "adapt_window", adapt_window));
  if (keep_name == "top_k") {
    keep = Keep::kTopK;
  } else if (keep_name == "candidates") {
    keep = Keep::kCandidates;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(section.KeyPath("keep"), ": '", keep_name, "' is not top_k or candidates"));
  }
  return SetTable(section, table_name);
}

absl::Status SketchSizing::SetTable(const ConfigReader& section, const std::string& name) {
  if (name == "f32") {
    table = Table::kF32;
  } else if (name == "f16") {
    table = Table::kF16;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(section.KeyPath("table"), ": '", name, "' is not f32 or f16"));
  }
  return absl::OkStatus();
}

std::uint32_t SketchSizing::ColsFor(std::uint64_t k, std::uint64_t dim) const {
  if (cols > 0) return static_cast<std::uint32_t>(cols);  // as given: Validate and SketchExchange check it
  const std::uint64_t r = std::max<std::uint32_t>(rows, 1);
  const std::uint64_t limit = std::min(kMaxSketchCells, kSketchCellsPerElement * dim) / r;
  const double wanted = std::ceil(cols_factor * static_cast<double>(k));
  return static_cast<std::uint32_t>(
      std::clamp<double>(wanted, 1.0, static_cast<double>(std::max<std::uint64_t>(limit, 1))));
}

SketchExchange::SketchExchange(const SchemeContext& ctx, const SketchSizing& sizing)
    : dim_(ctx.dim),
      sizing_(sizing),
      k_(SketchKeep(ctx.k, ctx.dim)),
      floor_(PlanOf(sizing, k_, ctx.dim, ctx.values)),
      values_(floor_.max_candidates()),
      taken_(sizing.keep == SketchSizing::Keep::kCandidates && sizing.p2 > 0 ? floor_.max_candidates() : k_) {
  auto hash =
      CountSketchHash::Create({sizing.rows, sizing.ColsFor(k_, ctx.dim), SketchSeed(ctx.seed, ctx.shard_id), ctx.dim});
  if (!hash.ok()) {
    status_ = hash.status();
    return;
  }
  hash_ = *hash;
  table_ = kernels::DeviceArray<float>(hash_.cells());
}

PhaseSpec SketchExchange::Spec(std::uint32_t phase) const {
  if (phase == 0) return PhaseSpec{Reduction::kSketchRecover, sizing_.p2 == 0 ? k_ : candidates()};
  PhaseSpec spec{Reduction::kDenseSum, sizing_.keep == SketchSizing::Keep::kCandidates ? 0 : k_};
  spec.at_previous_indices = true;
  return spec;
}

absl::StatusOr<PayloadValue> SketchExchange::Payload(std::uint32_t phase, const PhaseResults& earlier, const float* d_x,
                                                     const kernels::Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(status_);
  if (phase == 0) return SketchPayload(d_x, exec);
  const std::vector<std::uint32_t>* indices = earlier.empty() ? nullptr : ResultIndices(*earlier[0]);
  if (indices == nullptr) return absl::InvalidArgumentError("sketch exchange: phase 1 without a candidate set");
  SKETCHPS_RETURN_IF_ERROR(values_.GatherAt(*indices, d_x, dim_, exec));
  return PayloadValue{DenseValues{values_.HostValues()}};  // the indices are the candidates', known to all
}

absl::StatusOr<PayloadValue> SketchExchange::SketchPayload(const float* d_x, const kernels::Exec& exec) {
  table_.Zero();
  SKETCHPS_RETURN_IF_ERROR(kernels::SketchAccumulate(d_x, dim_, hash_, table_.data(), exec));
  SketchTable t{hash_.rows(), hash_.cols(), hash_.seed(), dim_, table_.ToHost()};
  if (sizing_.table == SketchSizing::Table::kF16) {
    // Cells beyond the binary16 range stay as they are (the table then travels as binary32).
    for (float& v : t.table) {
      if (std::fabs(v) <= kHalfMax) v = HalfBitsToFloat(FloatToHalfBits(v));
    }
  }
  return PayloadValue{std::move(t)};
}

absl::Status SketchExchange::wire_status() const {
  if (!status_.ok() || hash_.cells() <= kSketchCellsPerElement * dim_) return status_;
  return absl::InvalidArgumentError(absl::StrCat("a sketch of ", hash_.rows(), " rows x ", hash_.cols(), " columns (",
                                                 hash_.cells(), " cells) is more than a range of ", dim_,
                                                 " entries may send (", kSketchCellsPerElement,
                                                 " cells per entry): lower cols, cols_factor or rows"));
}

std::string SketchExchange::advisory() const {
  if (floor_.adaptive() && !floor_.floor_fits()) {
    return absl::StrCat(
        "budget_factor ", sizing_.budget_factor, " affords at most ", floor_.max_candidates(), " candidates (",
        floor_.budget_bytes(), " bytes up per round for a range of ", dim_, " entries), fewer than the ",
        floor_.floor_candidates(), " that recovery_floor ", sizing_.recovery_floor,
        " asks: the recovery floor cannot hold; raise budget_factor to at least ",
        absl::StrFormat("%.2f", static_cast<double>(floor_.bytes(floor_.floor_candidates())) /
                                    static_cast<double>(floor_.bytes(SketchKeep(sizing_.p2 * k_, dim_)))),
        ", or lower recovery_floor");
  }
  // What the budget allows at most: the candidates the run may reach.
  const std::uint64_t candidates = sizing_.p2 == 0 ? k_ : floor_.max_candidates();
  if (100 * candidates >= dim_) return "";
  return absl::StrCat(candidates, " candidates are fewer than 1% of a range of ", dim_, " entries (p2 x density < 0.01",
                      floor_.adaptive() ? ", at the most budget_factor allows" : "",
                      "): the sketch methods diverged below that rule on the CNN and the ResNet "
                      "(docs/reports/results.md \"Why the sketches diverge\"); raise p2 or density, or set "
                      "budget_factor (>= ",
                      absl::StrFormat("%.2f", static_cast<double>(floor_.bytes((dim_ + 99) / 100)) /
                                                  static_cast<double>(floor_.bytes(SketchKeep(sizing_.p2 * k_, dim_)))),
                      " for 1%) and recovery_floor: 0.01 (at density 0.001 on the CNN only a one-row table with f16 "
                      "values learned within 55x: docs/reports/results.md \"The recovery floor at >= 50x\"), or watch "
                      "recovered_share with scheme.diagnostics: true");
}

bool SketchExchange::Observe(const Aggregate& g, std::uint64_t round, const char* scheme, std::uint32_t worker,
                             std::uint32_t shard) {
  if (!floor_.adaptive()) return false;
  double mass = 0;
  bool empty = true;
  if (const auto* sparse = std::get_if<SparseVector>(&g)) {
    empty = sparse->idx.empty();
    for (const float v : sparse->val) mass += static_cast<double>(v) * v;
  } else if (const auto* dense = std::get_if<DenseValues>(&g)) {
    empty = dense->values.empty();
    for (const float v : dense->values) mass += static_cast<double>(v) * v;
  }
  const std::uint64_t before = floor_.candidates();
  switch (floor_.Observe(mass, empty)) {
    case CandidateController::Event::kNone: return false;
    case CandidateController::Event::kRaised:
      spdlog::info(
          "worker {}: {} shard {}: the returned mass grew {:.2f}x in a window of {} rounds (round {}): candidates "
          "{} -> {} ({} of {} budget bytes up per round; scheme.{}.budget_factor {})",
          worker, scheme, shard, floor_.last_growth(), sizing_.adapt_window, round, before, floor_.candidates(),
          floor_.bytes(floor_.candidates()), floor_.budget_bytes(), scheme, sizing_.budget_factor);
      return false;
    case CandidateController::Event::kNotHeld:
      spdlog::warn(
          "worker {}: {}: {} shard {}, round {}: the returned mass grew {:.2f}x in a window of {} rounds at the "
          "budget's {} candidates ({} bytes up per round): the sketch recovers too little for error feedback to "
          "converge (docs/reports/results.md \"Why the sketches diverge\"); raise scheme.{}.budget_factor, or "
          "scheme.density",
          worker, kFloorNotHeldTag, scheme, shard, round, floor_.last_growth(), sizing_.adapt_window,
          floor_.candidates(), floor_.bytes(floor_.candidates()), scheme);
      return true;
    case CandidateController::Event::kHeldAgain:
      spdlog::info("worker {}: {} shard {}, round {}: the returned mass stopped growing at {} candidates", worker,
                   scheme, shard, round, floor_.candidates());
      return false;
  }
  return false;
}

std::uint64_t SketchExchange::max_taken() const { return taken_.size(); }

absl::StatusOr<std::uint64_t> SketchExchange::LoadTaken(const Aggregate& g) {
  const auto* sparse = std::get_if<SparseVector>(&g);
  if (sparse == nullptr) return absl::InvalidArgumentError("sketch exchange: a compressed round's aggregate is dense");
  if (sparse->idx.size() > taken_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sketch exchange: aggregate has ", sparse->idx.size(), " entries, more than ", taken_.size()));
  }
  kernels::CopyToDevice(taken_.data(), sparse->idx.data(), sparse->idx.size() * sizeof(std::uint32_t));
  taken_count_ = sparse->idx.size();
  return taken_count_;
}

absl::Status SketchExchange::ZeroTaken(float* d_x, const kernels::Exec& exec) {
  return kernels::FillAt(d_x, dim_, taken_.data(), taken_count_, 0.0f, exec);
}

absl::Status RestoreArray(const SchemeState& state, const char* scheme, const char* name,
                          kernels::DeviceArray<float>& dst) {
  const auto it = state.arrays.find(name);
  if (it == state.arrays.end()) {
    return absl::InvalidArgumentError(absl::StrCat(scheme, ": state has no array '", name, "'"));
  }
  if (it->second.size() != dst.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(scheme, ": state array '", name, "' has ", it->second.size(), " values, expected ", dst.size()));
  }
  dst.FromHost(it->second);
  return absl::OkStatus();
}

}  // namespace sketchps
