// `sketchps loadgen --single mode:scheme:P`: one configuration of a sweep, in the child process the
// sweep starts for it (bench/loadgen/sweep.h), or by hand. The other loadgen flags describe the
// configuration (SweepConfigs' fields). Progress lines go to stderr; the result, or the error, is
// one JSON object on stdout or in --out:
//   {"mode", "scheme", "workers", "result": {...}}  or  {"mode", "scheme", "workers", "error": "..."}
// Without --work-dir the configuration's files go to a new directory in /tmp, removed on success.
#pragma once

#include "bench/loadgen/loadgen.h"

namespace sketchps::bench {

// Exit code: 0 measured, 1 the configuration failed, 2 bad options (a malformed --single).
int RunSingle(const LoadgenOptions& options);

}  // namespace sketchps::bench
