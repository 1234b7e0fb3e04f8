// What the load generator records about the machine a sweep ran on, and its memory-bandwidth
// yardstick: the bench's streaming pass (kernels/bandwidth.h BandwidthSum, a read-only vectorized sum
// at memory bandwidth) over a large vector, so that the shards' reduction traffic can be compared
// with what one pass over memory costs on the same machine in the same run.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace sketchps::bench {

// {"cpu", "cores", "memory", "kernel", "hostname"} from /proc and uname.
nlohmann::json MachineInfo();

// "0.52 0.71 0.80" from /proc/loadavg.
std::string LoadAverage();

// "2026-11-25T12:00:00Z".
std::string UtcNow();

// Bytes per second of one streaming pass over `floats` floats with `threads` OpenMP threads (0:
// the runtime's default): the median of `repeats` passes after one warm-up pass. Restores the
// OpenMP thread count. Not thread-safe (it uses every backend thread). Errors: the kernel's.
absl::StatusOr<double> StreamBytesPerSecond(std::size_t floats, int threads, int repeats = 5);

}  // namespace sketchps::bench
