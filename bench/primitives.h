// Benchmarks of the compression primitives (`sketchps bench`).
//
// Each benchmark runs one primitive on a float32 gradient of length d drawn from a heavy-tailed
// distribution (Student-t, 3 degrees of freedom; real gradients are heavy-tailed) and reports the
// median time over `repeats` runs, the bytes the primitive would put on the wire, and the density
// it achieved against the target. Every time is also expressed as a ratio to one streaming pass
// over the same vector (sum of |g|) measured in the same run, so figures from noisy, shared
// machines stay comparable.
//
// Not thread-safe; runs on the calling thread with the kernel backend's own parallelism.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sketchps::bench {

struct BenchOptions {
  std::uint64_t d = 25'600'000;        // gradient length (ResNet-50 has 25.6M parameters)
  double density = 0.001;              // target density k/d for selections; k for sketches
  std::vector<std::string> methods;    // empty: all of AllMethods()
  int repeats = 5;                     // timed runs per method (median reported)
  std::uint64_t seed = 1;              // data and hash seed
  std::uint32_t sketch_rows = 5;
  std::uint32_t sketch_cols = 0;       // 0: 10 * k, the sizing ALGORITHMS.md recommends
};

struct BenchResult {
  std::string method;
  std::uint64_t d = 0;
  double density_target = 0;
  double density_achieved = 0;
  double seconds = 0;               // median of repeats
  double stream_pass_seconds = 0;   // median time of sum(|g|) over the same vector
  double ratio_to_stream_pass = 0;
  std::uint64_t bytes_out = 0;      // what the primitive's output costs on the wire (raw encodings)
};

// Names accepted in BenchOptions::methods, in report order.
const std::vector<std::string>& AllMethods();

// Checks the options; errors name the offending option (e.g. "--density").
absl::Status ValidateOptions(const BenchOptions& options);

// Runs the benchmarks. `progress` (may be empty) receives one human-readable line per step.
absl::StatusOr<std::vector<BenchResult>> RunBenchmarks(const BenchOptions& options,
                                                       const std::function<void(const std::string&)>& progress);

}  // namespace sketchps::bench
