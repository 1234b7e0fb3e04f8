#include "common/net/rendezvous_file.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace sketchps {

absl::StatusOr<std::string> WaitForFile(const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!std::filesystem::exists(path)) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(path, ": not written within ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  std::ifstream in(path);
  if (!in) return absl::UnavailableError(absl::StrCat(path, ": cannot read"));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace sketchps
