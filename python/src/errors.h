// absl::Status -> sketchps::pycore::Error (sketchps/python_core.h), whose kind is the Python
// exception of sketchps/errors.py, chosen by code and Reason (common/reason.h), never by message:
//   kModelMismatch, kFingerprintMismatch,  kModelMismatch (ModelMismatchError): the ranks' models,
//   kReplicaDiverged                       weights or jobs differ, or the model differs from the job
//   IsConfigurationError, NotFound         kConfig (ConfigError, also a ValueError): bad job, environment
//   other FailedPrecondition               kOrder (OrderError): a call out of order
//   anything else                          kTransport (TransportError): servers or peers unreachable, timeouts
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sketchps/python_core.h"

namespace sketchps::pycore {

ErrorKind KindOf(const absl::Status& status);

// Throws Error(KindOf(status), status.message()). `status` must not be OK.
[[noreturn]] void Throw(const absl::Status& status);

inline void Check(const absl::Status& status) {
  if (!status.ok()) Throw(status);
}

template <class T>
T Unwrap(absl::StatusOr<T> value) {
  if (!value.ok()) Throw(value.status());
  return *std::move(value);
}

}  // namespace sketchps::pycore
