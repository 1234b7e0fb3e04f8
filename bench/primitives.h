// Benchmarks of the compression primitives (`sketchps bench`).
//
// Each benchmark runs one primitive on a float32 gradient of length d drawn from a heavy-tailed
// distribution (Student-t, 3 degrees of freedom; real gradients are heavy-tailed) and reports the
// median time over `repeats` runs, the bytes the primitive would put on the wire, and the density
// it achieved against the target. Every time is also expressed as a ratio to one streaming pass
// over the same vector measured in the same run (the yardstick: a read-only sum at memory
// bandwidth, kernels/bandwidth.h), so figures from noisy, shared machines stay comparable. Three
// extra rows per d report the yardstick itself ("stream_pass", with its GB/s), kernels::SumAbs
// ("sum_abs", the yardstick before 2026-11-25, which ran at a fraction of the bandwidth) and the
// yardstick's time on the device alone ("stream_pass_device": CUDA events around its kernels, as
// torch's operations are timed in docs/gpu.md; the same wall time on the CPU). Several
// values of d run one after another (a sweep), each with its own vector and yardstick.
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
  std::vector<std::uint64_t> d = {25'600'000};  // gradient lengths (ResNet-50 has 25.6M parameters)
  double density = 0.001;                       // target density k/d for selections; k for sketches
  std::vector<std::string> methods;             // empty: all of AllMethods()
  int repeats = 5;                              // timed runs per method (median reported)
  std::uint64_t seed = 1;                       // data and hash seed
  std::uint32_t sketch_rows = 5;
  std::uint32_t sketch_cols = 0;  // 0: 10 * k, CSVec's usual sizing
};

struct BenchResult {
  std::string method;
  std::uint64_t d = 0;
  double density_target = 0;
  double density_achieved = 0;
  double seconds = 0;              // median of repeats
  double stream_pass_seconds = 0;  // median time of the yardstick over the same vector
  double stream_pass_gbps = 0;     // the yardstick's read bandwidth, 4·d bytes / stream_pass_seconds
  double ratio_to_stream_pass = 0;
  std::uint64_t bytes_out = 0;  // what the primitive's output costs on the wire (raw encodings)
};

// The rows every run reports first for each d, besides the methods.
inline constexpr const char* kStreamPassRow = "stream_pass";
inline constexpr const char* kSumAbsRow = "sum_abs";
inline constexpr const char* kStreamPassDeviceRow = "stream_pass_device";

// Names accepted in BenchOptions::methods, in report order.
const std::vector<std::string>& AllMethods();

// Checks the options; errors name the offending option (e.g. "--density").
absl::Status ValidateOptions(const BenchOptions& options);

// Runs the benchmarks. `progress` (may be empty) receives one human-readable line per step.
absl::StatusOr<std::vector<BenchResult>> RunBenchmarks(const BenchOptions& options,
                                                       const std::function<void(const std::string&)>& progress);

}  // namespace sketchps::bench
