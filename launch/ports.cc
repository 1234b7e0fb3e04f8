#include "launch/ports.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace sketchps::launch {

absl::StatusOr<PortReport> AwaitPortFile(Child& child, const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    auto ports = ReadPortFile(path);
    if (ports.ok() || ports.status().code() != absl::StatusCode::kNotFound) return ports;
    if (auto status = child.Poll()) {
      return absl::UnavailableError(absl::StrCat(child.name(), " exited with code ", *status,
                                                 " before it reported its ports; last log lines:\n",
                                                 child.LogTail(10)));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(child.name(), " reported no ports in ", absl::FormatDuration(timeout), " (", path, ")"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace sketchps::launch
