#include "worker/skipped_rounds.h"

#include "absl/strings/str_cat.h"

namespace sketchps::worker {
namespace {

bool IsPowerOfTen(std::uint64_t n) {
  if (n < 10) return false;
  for (; n > 1; n /= 10) {
    if (n % 10 != 0) return false;
  }
  return true;
}

}  // namespace

bool SkippedRounds::Note(std::uint64_t round, bool skipped) {
  if (!skipped) return false;
  ++count_;
  if (!first_) first_ = round;
  return count_ <= kLoggedEach || IsPowerOfTen(count_);
}

std::string SkippedRounds::Describe() const {
  if (count_ == 0) return "";
  return absl::StrCat(count_, count_ == 1 ? " round" : " rounds",
                      " skipped for a non-finite gradient, the first round ", *first_);
}

}  // namespace sketchps::worker
