#include "engine/round.h"

#include <memory>
#include <vector>

#include "common/status.h"
#include "engine/phase_table.h"

namespace sketchps {

absl::StatusOr<RoundOutcome> RunRound(Scheme& scheme, Aggregator& aggregator, std::uint32_t shard,
                                      const RoundInfo& info, const float* d_grad) {
  SKETCHPS_RETURN_IF_ERROR(scheme.BeginRound(info, d_grad));
  RoundTraffic traffic;
  std::shared_ptr<const PhaseResult> result;
  std::vector<Contribution> made;  // this round's contributions, for a replay
  int replays = 0;
  for (std::uint32_t phase = 0; phase < scheme.NumPhases(); ++phase) {
    if (phase == made.size()) {
      SKETCHPS_ASSIGN_OR_RETURN(Contribution c, scheme.Contribute(phase, result.get()));
      made.push_back(std::move(c));
    }
    const Contribution& c = made[phase];
    if (c.payload) traffic.bytes_up += RawPayloadBytes(*c.payload, c.values);
    auto outcome = aggregator.RunPhase(shard, info.round, phase, c);
    if (IsReplayRound(outcome.status()) && phase > 0 && replays < kMaxReplays) {
      ++replays;
      phase = static_cast<std::uint32_t>(-1);  // the loop's ++ starts again at phase 0
      continue;
    }
    SKETCHPS_RETURN_IF_ERROR(outcome.status());
    result = *std::move(outcome);
    traffic.bytes_down += RawPayloadBytes(result->value);
  }
  SKETCHPS_ASSIGN_OR_RETURN(Aggregate g, scheme.Finish(*result));
  return RoundOutcome{std::move(g), traffic};
}

}  // namespace sketchps
