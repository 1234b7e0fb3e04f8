#include "bench/loadgen/counting_aggregator.h"

#include <utility>

#include "engine/phase.h"

namespace sketchps::bench {

absl::StatusOr<std::shared_ptr<const PhaseResult>> CountingAggregator::RunPhase(std::uint32_t shard,
                                                                                std::uint64_t round,
                                                                                std::uint32_t phase,
                                                                                Contribution contribution) {
  const bool contributed = contribution.payload.has_value();
  const std::uint64_t up = contributed ? RawPayloadBytes(*contribution.payload, contribution.values) : 0;
  auto result = inner_.RunPhase(shard, round, phase, std::move(contribution));
  if (result.ok() && shard < slots_.size() && phase < kPhaseSlots) {
    PhaseTotals& t = slots_[shard][phase];
    t.payload_bytes += up;
    t.contributions += contributed ? 1 : 0;
    t.result_bytes += RawPayloadBytes((*result)->value);
  }
  return result;
}

}  // namespace sketchps::bench
