#include "common/config/job_span.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status.h"

namespace sketchps {
namespace {

constexpr const char* kExpected = "a span such as '200 rounds', '1.5 epochs', '10%' or a list of them";

absl::Status Bad(const std::string& key, absl::string_view text, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(key, ": '", text, "' ", why, " (expected ", kExpected, ")"));
}

}  // namespace

JobSpan JobSpan::AtMost(const JobSpan& other) const {
  std::vector<Term> terms = terms_;
  terms.insert(terms.end(), other.terms_.begin(), other.terms_.end());
  return JobSpan(std::move(terms));
}

absl::StatusOr<JobSpan::Term> JobSpan::ParseTerm(absl::string_view text, const std::string& key) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  Term term;
  if (absl::ConsumeSuffix(&rest, "%")) {
    term.unit = Unit::kJobFraction;
  } else if (absl::ConsumeSuffix(&rest, "rounds") || absl::ConsumeSuffix(&rest, "round")) {
    term.unit = Unit::kRounds;
  } else if (absl::ConsumeSuffix(&rest, "epochs") || absl::ConsumeSuffix(&rest, "epoch")) {
    term.unit = Unit::kEpochs;
  } else {
    double zero = 1;
    if (absl::SimpleAtod(rest, &zero) && zero == 0) return Term{};
    return Bad(key, text, "has no unit");
  }
  rest = absl::StripAsciiWhitespace(rest);
  double v = 0;
  if (!absl::SimpleAtod(rest, &v) || !std::isfinite(v)) return Bad(key, text, "does not start with a number");
  if (v < 0) return Bad(key, text, "is negative");
  if (term.unit == Unit::kJobFraction) {
    if (v > 100) return Bad(key, text, "is more than the whole job");
    v /= 100.0;
  }
  term.value = v;
  return term;
}

absl::StatusOr<JobSpan> JobSpan::FromYaml(const YAML::Node& node, const std::string& key) {
  std::vector<Term> terms;
  if (node.IsScalar()) {
    auto term = ParseTerm(node.Scalar(), key);
    if (!term.ok()) return term.status();
    terms.push_back(*term);
  } else if (node.IsSequence() && node.size() > 0) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      const std::string item = absl::StrCat(key, "[", i, "]");
      if (!node[i].IsScalar()) return absl::InvalidArgumentError(absl::StrCat(item, ": expected ", kExpected));
      auto term = ParseTerm(node[i].Scalar(), item);
      if (!term.ok()) return term.status();
      terms.push_back(*term);
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(key, ": expected ", kExpected));
  }
  return JobSpan(std::move(terms));
}

double JobSpan::Rounds(const JobClock& clock) const {
  std::optional<double> shortest;
  auto take = [&shortest](double rounds) { shortest = std::min(shortest.value_or(kMaxRounds), rounds); };
  for (const Term& t : terms_) {
    switch (t.unit) {
      case Unit::kRounds: take(t.value); break;
      case Unit::kEpochs: take(t.value * clock.rounds_per_epoch); break;  // may overflow to inf: capped
      case Unit::kJobFraction:
        if (clock.total_rounds > 0) take(t.value * static_cast<double>(clock.total_rounds));
        break;
    }
  }
  return shortest.value_or(0.0);
}

bool JobSpan::IsZero() const {
  return terms_.empty() || std::any_of(terms_.begin(), terms_.end(), [](const Term& t) { return t.value == 0; });
}

std::string JobSpan::Text() const {
  std::vector<std::string> parts;
  for (const Term& t : terms_) {
    switch (t.unit) {
      case Unit::kRounds:
        parts.push_back(t.value == 0 ? "0" : absl::StrCat(t.value, t.value == 1 ? " round" : " rounds"));
        break;
      case Unit::kEpochs: parts.push_back(absl::StrCat(t.value, t.value == 1 ? " epoch" : " epochs")); break;
      case Unit::kJobFraction: parts.push_back(absl::StrCat(t.value * 100.0, "%")); break;
    }
  }
  if (parts.empty()) return "0";
  if (parts.size() == 1) return parts[0];
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

absl::StatusOr<std::optional<double>> ReadSpanOrLegacy(ConfigReader& r, const std::string& key,
                                                       const std::string& legacy, JobSpan::Unit legacy_unit,
                                                       JobSpan& span) {
  if (!r.Has(legacy)) {
    SKETCHPS_RETURN_IF_ERROR(r.Get(key, span));
    return std::nullopt;
  }
  if (r.Has(key)) {
    return absl::InvalidArgumentError(absl::StrCat(r.KeyPath(legacy), ": give ", key, " or ", legacy, ", not both"));
  }
  double value = 0;
  SKETCHPS_RETURN_IF_ERROR(r.Get(legacy, value));
  if (value < 0) {  // Get refuses non-finite numbers
    return absl::InvalidArgumentError(absl::StrCat(r.KeyPath(legacy), ": must be >= 0, got ", value));
  }
  switch (legacy_unit) {
    case JobSpan::Unit::kRounds: span = JobSpan::Rounds(value); break;
    case JobSpan::Unit::kEpochs: span = JobSpan::Epochs(value); break;
    case JobSpan::Unit::kJobFraction: span = JobSpan::Fraction(value); break;
  }
  return value;
}

}  // namespace sketchps
