#include "python/src/errors.h"

#include <pybind11/pybind11.h>

#include <string>

#include "absl/strings/match.h"

namespace sketchps::python {
namespace {

// A model, layout, job or replica that differs between the ranks, or from the job.
bool AboutMismatch(const absl::Status& status) {
  for (const char* what : {"replica", "layout", "job fingerprint"}) {
    if (absl::StrContains(status.message(), what)) return true;
  }
  return false;
}

const char* ErrorClass(const absl::Status& status) {
  if (AboutMismatch(status)) return "ModelMismatchError";
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound: return "ConfigError";
    case absl::StatusCode::kFailedPrecondition: return "OrderError";
    default: return "TransportError";
  }
}

}  // namespace

void Raise(const absl::Status& status) {
  namespace py = pybind11;
  const py::object cls = py::module_::import("sketchps.errors").attr(ErrorClass(status));
  PyErr_SetString(cls.ptr(), std::string(status.message()).c_str());
  throw py::error_already_set();
}

}  // namespace sketchps::python
