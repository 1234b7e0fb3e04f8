// RunRound: one round of one scheme on one shard through any Aggregator (scheme.h describes the
// protocol). Also accounts the bytes this worker sent and received, in raw payload bytes.
//
// Replay: when the aggregator answers a phase with IsReplayRound (phase_table.h: the shard
// restarted and lost the round's earlier phases), the round is run again from phase 0 with the
// contributions already made (kept for this purpose), so the shard reduces exactly what it would
// have reduced without the restart; the scheme is not asked again. At most kMaxReplays times.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/aggregator.h"
#include "engine/scheme.h"

namespace sketchps {

struct RoundTraffic {
  std::uint64_t bytes_up = 0;    // this worker's payloads (raw encodings; values at Contribution::values)
  std::uint64_t bytes_down = 0;  // the phase results it received
};

struct RoundOutcome {
  Aggregate aggregate;
  RoundTraffic traffic;
};

inline constexpr int kMaxReplays = 3;

absl::StatusOr<RoundOutcome> RunRound(Scheme& scheme, Aggregator& aggregator, std::uint32_t shard,
                                      const RoundInfo& info, const float* d_grad);

}  // namespace sketchps
