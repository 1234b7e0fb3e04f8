// The rounds a worker sat out because its gradient (or its local steps' pseudo-gradient) was not
// finite: it sent nothing and applied the others' aggregate (engine/scheme.h). Such a round must
// never pass silently, yet a diverged job must not write one log line a round either.
//
//   SkippedRounds skipped;
//   if (skipped.Note(round, record["skipped"])) log(...);  // true for the first kLoggedEach skips,
//                                                          // then at every power-of-ten count
//   skipped.count(), skipped.first()                       // for the summary
//   skipped.Describe()  // "" or "6 rounds skipped for a non-finite gradient, the first round 5"
//
// Rounds are numbered as in the records ("round", from 0) and `sketchps run`'s messages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sketchps::worker {

class SkippedRounds {
 public:
  static constexpr std::uint64_t kLoggedEach = 3;

  // Counts `round` (0-based) when `skipped`; returns whether this skip deserves a log line.
  bool Note(std::uint64_t round, bool skipped);

  std::uint64_t count() const { return count_; }
  std::optional<std::uint64_t> first() const { return first_; }
  std::string Describe() const;

 private:
  std::uint64_t count_ = 0;
  std::optional<std::uint64_t> first_;
};

}  // namespace sketchps::worker
