#include "schemes/round.h"

#include <memory>

#include "common/status.h"

namespace sketchps {

absl::StatusOr<RoundOutcome> RunRound(Scheme& scheme, Aggregator& aggregator, std::uint32_t shard,
                                      const RoundInfo& info, const float* d_grad) {
  SKETCHPS_RETURN_IF_ERROR(scheme.BeginRound(info, d_grad));
  RoundTraffic traffic;
  std::shared_ptr<const PhaseResult> result;
  for (std::uint32_t phase = 0; phase < scheme.NumPhases(); ++phase) {
    SKETCHPS_ASSIGN_OR_RETURN(Contribution c, scheme.Contribute(phase, result.get()));
    if (c.payload) traffic.bytes_up += RawPayloadBytes(*c.payload);
    SKETCHPS_ASSIGN_OR_RETURN(result, aggregator.RunPhase(shard, info.round, phase, std::move(c)));
    traffic.bytes_down += RawPayloadBytes(result->value);
  }
  SKETCHPS_ASSIGN_OR_RETURN(Aggregate g, scheme.Finish(*result));
  return RoundOutcome{std::move(g), traffic};
}

}  // namespace sketchps
