// `sketchps compare`: one job in both modes, each with one process killed after the same round, side
// by side. Parameter-server mode loses the last shard (SIGKILL, restarted with the same flags: it
// resumes from its checkpoint); decentralized mode loses the last worker (SIGKILL for good: the
// survivors detect the dead peer within the peer timeout, regroup and go on with P - 1, or stop
// with peer.on_failure: stop). Writes <out>/{ps,decentralized}/ (run directories) and
// <out>/compare.md, <out>/compare.json with, per mode: rounds per second before the kill, bytes per
// worker per round (summary.json's quantity: tools/summary.h Traffic, over every rank), seconds from the kill to
// recovery (rank 0's round gap across the kill minus the median round time before it) or to detection (a stopped run:
// the first survivor's exit), rounds lost (work thrown away: rounds rolled back by a regroup; rounds never run by a
// stopped run), the workers at the end and the final test accuracy or the failure.
#pragma once

#include <cstdint>
#include <string>

#include "tools/run.h"

namespace sketchps::tools {

struct CompareOptions {
  JobFlags job;
  std::string out = "runs/compare";
  std::uint64_t kill_round = 10;     // kill after rank 0 completed this many rounds
  double peer_timeout_seconds = 10;  // decentralized detection bound (> 0 overrides the job's)
  std::string bin_dir;
};

// 0 when both runs went as described above (ps completed; decentralized completed, or stopped when
// the job says peer.on_failure: stop); 1 otherwise; 2 for bad options.
int CompareModes(const CompareOptions& options);

}  // namespace sketchps::tools
