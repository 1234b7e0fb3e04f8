// The recovery figures a compressed round's metrics.jsonl record may carry (session/session.cc,
// docs/methods.md "Recovery diagnostics"): read by the worker's gauges and the run's plots.
#pragma once

namespace sketchps::worker {

inline constexpr const char* kRecoveryFigures[] = {
    "input_norm", "residual_norm", "sent_share", "recovered_share", "best_share", "hit_rate", "candidate_hit_rate"};

}  // namespace sketchps::worker
