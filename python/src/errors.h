// absl::Status -> the Python exceptions of sketchps/errors.py. Call with the GIL held.
//   a message about a replica, a layout    ModelMismatchError: the ranks' models, weights or jobs
//   or the job fingerprint                 differ, or the model differs from the job
//   other InvalidArgument, NotFound        ConfigError (also a ValueError): bad job, environment
//   other FailedPrecondition               OrderError: a call out of order
//   anything else                          TransportError: servers or peers unreachable, timeouts
#pragma once

#include "absl/status/status.h"

namespace sketchps::python {

[[noreturn]] void Raise(const absl::Status& status);

}  // namespace sketchps::python
