#include "python/src/errors.h"

#include <string>

#include <pybind11/pybind11.h>

#include "common/reason.h"

namespace sketchps::python {
namespace {

const char* ErrorClass(const absl::Status& status) {
  if (IsModelMismatch(status) || IsFingerprintMismatch(status) || IsReplicaDivergence(status)) {
    return "ModelMismatchError";
  }
  if (IsConfigurationError(status) || status.code() == absl::StatusCode::kNotFound) return "ConfigError";
  if (status.code() == absl::StatusCode::kFailedPrecondition) return "OrderError";
  return "TransportError";
}

}  // namespace

void Raise(const absl::Status& status) {
  namespace py = pybind11;
  const py::object cls = py::module_::import("sketchps.errors").attr(ErrorClass(status));
  PyErr_SetString(cls.ptr(), std::string(status.message()).c_str());
  throw py::error_already_set();
}

}  // namespace sketchps::python
