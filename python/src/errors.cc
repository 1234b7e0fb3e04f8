#include "python/src/errors.h"

#include <string>

#include "common/reason.h"

namespace sketchps::pycore {

Error::Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
Error::~Error() = default;

ErrorKind KindOf(const absl::Status& status) {
  if (IsModelMismatch(status) || IsFingerprintMismatch(status) || IsReplicaDivergence(status)) {
    return ErrorKind::kModelMismatch;
  }
  if (IsConfigurationError(status) || status.code() == absl::StatusCode::kNotFound) return ErrorKind::kConfig;
  if (status.code() == absl::StatusCode::kFailedPrecondition) return ErrorKind::kOrder;
  return ErrorKind::kTransport;
}

void Throw(const absl::Status& status) { throw Error(KindOf(status), std::string(status.message())); }

}  // namespace sketchps::pycore
