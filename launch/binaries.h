// Where the sketchps programs are, for every launcher (`sketchps run`, the load generator, the
// Python harnesses through `sketchps launch`): one search rule.
//
//   FindBinary(Program::kServer, "")            next to the running executable, else in the build
//                                               tree's server/ folder beside it
//   FindBinary(Program::kServer, "build/ci")    build/ci/sketchps-server, else build/ci/server/...
//
// NotFound names every path tried and --bin-dir. Thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace sketchps::launch {

enum class Program { kServer, kWorker, kFrontEnd, kBench, kSim };

// "sketchps-server", "sketchps-worker", "sketchps", "sketchps-bench", "sketchps-sim".
const char* ProgramName(Program program);
// The build tree's folder of the program: "server", "worker", "tools", "bench", "sim".
const char* ProgramFolder(Program program);

// The executable of `program` (see above); `bin_dir` "" searches around the running executable.
absl::StatusOr<std::string> FindBinary(Program program, const std::string& bin_dir);

}  // namespace sketchps::launch
