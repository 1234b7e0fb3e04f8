// Internal to bench/: device data shared by the primitive benchmarks, and the method registry.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/primitives.h"
#include "common/count_sketch_hash.h"
#include "kernels/backend.h"

namespace sketchps::bench {

// Device buffers sized once for the largest method, so timed runs never allocate.
struct Workspace {
  // The buffers for one gradient of the given length (one of options.d).
  Workspace(const BenchOptions& options, std::uint64_t length, std::vector<float> host_gradient);

  BenchOptions options;
  std::uint64_t d;
  std::uint64_t k;            // density * d, at least 1
  std::uint32_t sketch_cols;  // options.sketch_cols or 10 * k
  kernels::Scratch scratch;
  kernels::Exec exec;
  kernels::DeviceArray<float> grad;
  kernels::DeviceArray<std::uint32_t> out_idx;  // capacity d
  kernels::DeviceArray<float> out_val;          // capacity d
  CountSketchHash hash;                         // (sketch_rows, sketch_cols, seed, d)
  kernels::DeviceArray<float> table;            // sketch tables, rows x cols
  kernels::DeviceArray<float> other_table;
};

// What one run of a primitive produced.
struct Outcome {
  std::uint64_t selected = 0;   // entries selected (0 for pure sketch operations)
  std::uint64_t bytes_out = 0;  // wire bytes of the output (raw u32 indices + f32 values, or the table)
};

// A benchmarked primitive: `prepare` runs untimed before every timed `run`.
struct Method {
  std::string name;
  std::function<absl::Status(Workspace&)> prepare;
  std::function<absl::StatusOr<Outcome>(Workspace&)> run;
};

// The registry, in report order (bench/methods.cc).
const std::vector<Method>& Methods();

}  // namespace sketchps::bench
