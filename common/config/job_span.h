// JobSpan: a stretch of training (a warm-up, a window) in the unit the user thinks in.
//
// In a job spec a span is one term or a list of terms, the list meaning the shortest of them:
//   warmup: 200 rounds        # rounds (optimizer steps)
//   warmup: 1.5 epochs        # passes over the training set (JobClock::rounds_per_epoch rounds each)
//   warmup: 10%               # a fraction of the whole job (JobClock::total_rounds)
//   warmup: [4 epochs, 10%]   # whichever is shorter: a paper's length, capped for short jobs
//   warmup: 0                 # none (a bare 0 is the only number without a unit)
// Singular units ("1 round", "1 epoch") are accepted too. Values are finite and >= 0; a percentage is
// at most 100.
//
// Rounds(clock) resolves a span against the job: fractional rounds, so a schedule with stages can
// split it evenly. A fraction term is ignored while the job's length is unknown (total_rounds 0: unit
// tests and tools that build a scheme outside a job); a span of only such terms is then 0. The result
// is at most kMaxRounds, so callers may convert it to an integer count.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config/config_reader.h"
#include "common/job_clock.h"
#include "yaml-cpp/yaml.h"

namespace sketchps {

class JobSpan {
 public:
  static constexpr double kMaxRounds = 1e15;  // longer than any job; exact in a double and a uint64
  enum class Unit { kRounds, kEpochs, kJobFraction };
  struct Term {
    double value = 0;  // rounds, epochs, or a fraction in [0, 1]
    Unit unit = Unit::kRounds;
  };

  JobSpan() = default;  // zero: no rounds
  static JobSpan Rounds(double n) { return JobSpan({{n, Unit::kRounds}}); }
  static JobSpan Epochs(double n) { return JobSpan({{n, Unit::kEpochs}}); }
  static JobSpan Fraction(double f) { return JobSpan({{f, Unit::kJobFraction}}); }
  // The shortest of this span's terms and `other`'s.
  JobSpan AtMost(const JobSpan& other) const;

  // Parses one term ("200 rounds", "1.5 epochs", "10%", "0"). Errors name `key` and say what is expected.
  static absl::StatusOr<Term> ParseTerm(absl::string_view text, const std::string& key);
  // A scalar term or a non-empty list of terms, as in a job spec.
  static absl::StatusOr<JobSpan> FromYaml(const YAML::Node& node, const std::string& key);

  // The span in (fractional) rounds of `clock`'s job: the minimum over its terms (see above).
  double Rounds(const JobClock& clock) const;
  bool IsZero() const;
  const std::vector<Term>& terms() const { return terms_; }
  // The spec spelling: "200 rounds", "[4 epochs, 10%]", "0".
  std::string Text() const;

 private:
  explicit JobSpan(std::vector<Term> terms) : terms_(std::move(terms)) {}
  std::vector<Term> terms_;
};

// Reads the span at `key`, or the round-1 key `legacy` that holds a plain number of `legacy_unit`
// (>= 0). Giving both is an error: "<path>.<legacy>: give <key> or <legacy>, not both".
// `span` keeps its value when neither is given. Returns the legacy number when that key was given.
absl::StatusOr<std::optional<double>> ReadSpanOrLegacy(ConfigReader& r, const std::string& key,
                                                       const std::string& legacy, JobSpan::Unit legacy_unit,
                                                       JobSpan& span);

}  // namespace sketchps
