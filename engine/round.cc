#include "engine/round.h"

#include <memory>
#include <vector>

#include "common/reason.h"
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
  bool left_out = false;
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
    if (IsStaleRound(outcome.status())) {
      // The shards closed this round without this worker and moved on past their phase tables'
      // window (a long pause): a left-out round like any other, whose final result they still keep.
      left_out = true;
    } else {
      SKETCHPS_RETURN_IF_ERROR(outcome.status());
      result = *std::move(outcome);
      traffic.bytes_down += RawPayloadBytes(result->value);
      left_out = IsExcluded(*result, aggregator.worker_id());
    }
    if (!left_out || (result != nullptr && phase + 1 == scheme.NumPhases())) continue;
    // The round goes on without this worker: only its final result matters now.
    auto final_result = aggregator.RunPhase(shard, info.round, scheme.NumPhases() - 1, FetchOnly(true));
    if (IsReplayRound(final_result.status()) && replays < kMaxReplays) {
      ++replays;  // the shard restarted and lost the round (and who was left out): run it whole
      left_out = false;
      phase = static_cast<std::uint32_t>(-1);
      continue;
    }
    SKETCHPS_RETURN_IF_ERROR(final_result.status());
    result = *std::move(final_result);
    traffic.bytes_down += RawPayloadBytes(result->value);
    break;
  }
  if (left_out) {
    SKETCHPS_ASSIGN_OR_RETURN(Aggregate g, scheme.FinishExcluded(*result));
    return RoundOutcome{std::move(g), traffic, true};
  }
  SKETCHPS_ASSIGN_OR_RETURN(Aggregate g, scheme.Finish(*result));
  return RoundOutcome{std::move(g), traffic, false};
}

Contribution FetchOnly(bool final_phase) {
  Contribution c;
  c.spec.final_phase = final_phase;
  return c;
}

absl::StatusOr<RoundOutcome> FetchRound(Scheme& scheme, Aggregator& aggregator, std::uint32_t shard,
                                        std::uint64_t round, std::uint64_t dim) {
  SKETCHPS_ASSIGN_OR_RETURN(auto result,
                            aggregator.RunPhase(shard, round, scheme.PhasesIn(round) - 1, FetchOnly(true)));
  SKETCHPS_ASSIGN_OR_RETURN(Aggregate g, MeanAggregate(*result, dim));
  SKETCHPS_RETURN_IF_ERROR(scheme.ObserveFetched(round, g));
  return RoundOutcome{std::move(g), RoundTraffic{0, RawPayloadBytes(result->value)}, true};
}

}  // namespace sketchps
