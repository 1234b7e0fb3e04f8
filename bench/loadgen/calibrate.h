// `sketchps loadgen --calibrate`: how the synthetic gradients' overlap compares with real ones.
//
// The figure is the union of the top-k sets of 4 workers, per shard, as a multiple of k (density
// --density): for the real dumps of --gradients (every dumped round with at least 4 workers), and
// for the synthetic generator on the job model's layout at correlations 0, 0.1, .., 1. It then
// bisects the correlation at which the generator matches the real mean (or kCalibrationUnionOverK
// without dumps). Prints a table, or JSON with --json.
#pragma once

#include "bench/loadgen/loadgen.h"

namespace sketchps::bench {

// The exit code: 0, or 2 for unusable options (the message on stderr).
int RunCalibrate(const LoadgenOptions& options);

}  // namespace sketchps::bench
