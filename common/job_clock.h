// JobClock: how long the job is, in the two units schedules are written in (rounds and epochs).
//
// A plain value in the core of common/, so that the engine's Scheme interface can carry it without
// the YAML reader: common/config/job_span.h resolves a span of a job spec against it, and the job
// spec builds it (JobSpec::clock()).
#pragma once

#include <cstdint>

namespace sketchps {

struct JobClock {
  double rounds_per_epoch = 1.0;   // > 0
  std::uint64_t total_rounds = 0;  // 0: unknown (unit tests and tools that build a scheme outside a job)
};

}  // namespace sketchps
