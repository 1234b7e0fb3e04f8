#include "engine/aggregator.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sketchps {

absl::StatusOr<std::vector<float>> SumOverWorkers(Aggregator& aggregator, std::uint64_t round,
                                                  std::vector<float> values) {
  PhaseSpec spec{Reduction::kDenseSum};
  spec.final_phase = false;
  spec.auxiliary = true;
  const std::size_t n = values.size();
  SKETCHPS_ASSIGN_OR_RETURN(
      auto result,
      aggregator.RunPhase(0, round, kAuxPhase, Contribution{spec, PayloadValue{DenseValues{std::move(values)}}}));
  const auto* sum = std::get_if<DenseValues>(&result->value);
  if (sum == nullptr || sum->values.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("auxiliary sum of round ", round, ": expected ", n, " values"));
  }
  return sum->values;
}

}  // namespace sketchps
