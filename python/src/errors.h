// absl::Status -> the Python exceptions of sketchps/errors.py, by code and Reason (common/reason.h),
// never by message. Call with the GIL held.
//   kModelMismatch, kFingerprintMismatch,  ModelMismatchError: the ranks' models, weights or jobs
//   kReplicaDiverged                       differ, or the model differs from the job
//   IsConfigurationError, NotFound         ConfigError (also a ValueError): bad job, environment
//   other FailedPrecondition               OrderError: a call out of order
//   anything else                          TransportError: servers or peers unreachable, timeouts
#pragma once

#include "absl/status/status.h"

namespace sketchps::python {

[[noreturn]] void Raise(const absl::Status& status);

}  // namespace sketchps::python
