// RunRound: one round of one scheme on one shard through any Aggregator (scheme.h describes the
// protocol). Also accounts the bytes this worker sent and received, in raw payload bytes.
//
// Replay: when the aggregator answers a phase with IsReplayRound (phase_table.h: the shard
// restarted and lost the round's earlier phases), the round is run again from phase 0 with the
// contributions already made (kept for this purpose), so the shard reduces exactly what it would
// have reduced without the restart; the scheme is not asked again. At most kMaxReplays times.
//
// Left out (a round deadline, engine/phase_table.h): when a phase result lists this worker in
// PhaseResult::excluded, the round no longer needs its payloads: RunRound fetches the final phase's
// result (FetchOnly) and ends the round with Scheme::FinishExcluded, which keeps the gradient. A push
// refused as stale (IsStaleRound: the shard closed the round without this worker and moved past its
// phase table's window) is a left-out round too: the shard still serves its final result.
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
  bool left_out = false;  // the round closed without this worker (a round deadline; FinishExcluded)
};

inline constexpr int kMaxReplays = 3;

absl::StatusOr<RoundOutcome> RunRound(Scheme& scheme, Aggregator& aggregator, std::uint32_t shard,
                                      const RoundInfo& info, const float* d_grad);

// A contribution without a payload to `phase` (final_phase set when it is the round's last): what a
// worker left out of a round sends to obtain that phase's result (the shard stores nothing of it).
Contribution FetchOnly(bool final_phase);

// G_t of a round that already closed without this worker, fetched from its final phase (a worker that
// fell behind catches up this way, without computing the round): the scheme's state is not touched, and the
// outcome counts as left out. The scheme only observes G_t (Scheme::ObserveFetched).
absl::StatusOr<RoundOutcome> FetchRound(Scheme& scheme, Aggregator& aggregator, std::uint32_t shard,
                                        std::uint64_t round, std::uint64_t dim);

}  // namespace sketchps
