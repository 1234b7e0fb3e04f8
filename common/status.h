// Status helpers for sketchps.
//
// Every fallible operation returns absl::Status or absl::StatusOr<T>. Abseil 20220623 (Debian 12)
// has no status_macros.h, so the two propagation macros live here:
//
//   SKETCHPS_RETURN_IF_ERROR(expr);             // returns the Status of expr when it is not OK
//   SKETCHPS_ASSIGN_OR_RETURN(auto x, expr);    // unwraps a StatusOr or returns its Status
//
// Exceptions and aborts are reserved for programmer errors; input from files, flags or the network
// always yields a Status whose message names the offending field.
//
// Annotate(status, "shard 1") gives the status "shard 1: <message>" with the same code and payloads
// (the Reason of common/reason.h among them): context for people, the same decision for programs.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sketchps {

// `status` with "<context>: " before its message, its code and payloads kept; OK stays OK.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace sketchps

#define SKETCHPS_STATUS_CONCAT_INNER(a, b) a##b
#define SKETCHPS_STATUS_CONCAT(a, b) SKETCHPS_STATUS_CONCAT_INNER(a, b)

#define SKETCHPS_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::absl::Status sketchps_status_ = (expr);            \
    if (!sketchps_status_.ok()) return sketchps_status_; \
  } while (0)

#define SKETCHPS_ASSIGN_OR_RETURN(lhs, rexpr) \
  SKETCHPS_ASSIGN_OR_RETURN_IMPL(SKETCHPS_STATUS_CONCAT(sketchps_statusor_, __LINE__), lhs, rexpr)

#define SKETCHPS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                   \
  if (!tmp.ok()) return std::move(tmp).status();        \
  lhs = std::move(tmp).value()
