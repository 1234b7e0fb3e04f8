// JobSpan (common/config/job_span.h): parsing, resolution against a job, the shortest of several terms.
#include "common/config/job_span.h"

#include <catch2/catch.hpp>

#include "common/config/config_reader.h"

using sketchps::ConfigReader;
using sketchps::JobClock;
using sketchps::JobSpan;

namespace {

JobSpan Parse(const std::string& yaml) {
  auto span = JobSpan::FromYaml(YAML::Load(yaml), "k");
  REQUIRE(span.ok());
  return *span;
}

std::string Error(const std::string& yaml) {
  auto span = JobSpan::FromYaml(YAML::Load(yaml), "scheme.dgc.warmup");
  REQUIRE_FALSE(span.ok());
  return std::string(span.status().message());
}

}  // namespace

TEST_CASE("JobSpan resolves rounds, epochs and job fractions", "[job_span]") {
  const JobClock clock{468, 1404};  // 3 epochs of 468 rounds
  CHECK(Parse("200 rounds").Rounds(clock) == 200);
  CHECK(Parse("1 round").Rounds(clock) == 1);
  CHECK(Parse("1.5 epochs").Rounds(clock) == 702);
  CHECK(Parse("1epoch").Rounds(clock) == 468);
  CHECK(Parse("10%").Rounds(clock) == Approx(140.4));
  CHECK(Parse("100%").Rounds(clock) == 1404);
  CHECK(Parse("0").Rounds(clock) == 0);
  CHECK(Parse("0").IsZero());
  CHECK(JobSpan().Rounds(clock) == 0);
  CHECK(JobSpan().IsZero());
}

TEST_CASE("A huge span resolves to at most kMaxRounds, so it converts to an integer count", "[job_span]") {
  const JobClock clock{1e9, 0};
  CHECK(Parse("1e300 rounds").Rounds(clock) == JobSpan::kMaxRounds);
  CHECK(Parse("1e300 epochs").Rounds(clock) == JobSpan::kMaxRounds);
  CHECK(Parse("[1e300 epochs, 7 rounds]").Rounds(clock) == 7);
}

TEST_CASE("A list of terms is the shortest of them, fractions wait for a known job length", "[job_span]") {
  const JobSpan span = Parse("[4 epochs, 10%]");
  CHECK(span.Rounds({468, 468}) == Approx(46.8));       // a one-epoch job: 10%
  CHECK(span.Rounds({468, 46800}) == 1872);             // a 100-epoch job: 4 epochs
  CHECK(span.Rounds({468, 0}) == 1872);                 // length unknown: the fraction is ignored
  CHECK(JobSpan::Fraction(0.5).Rounds({468, 0}) == 0);  // only a fraction, length unknown: none
  CHECK(JobSpan::Epochs(4).AtMost(JobSpan::Fraction(0.1)).Text() == "[4 epochs, 10%]");
  CHECK_FALSE(span.IsZero());
  CHECK(Parse("[3 rounds, 0]").IsZero());
}

TEST_CASE("JobSpan text round-trips through the parser", "[job_span]") {
  for (const char* text : {"200 rounds", "1 round", "1.5 epochs", "1 epoch", "12.5%", "[4 epochs, 10%]", "0"}) {
    INFO(text);
    CHECK(Parse(text).Text() == text);
  }
}

TEST_CASE("JobSpan errors name the key and the expected forms", "[job_span]") {
  CHECK(Error("3") ==
        "scheme.dgc.warmup: '3' has no unit (expected a span such as '200 rounds', '1.5 epochs', '10%' or a "
        "list of them)");
  CHECK_THAT(Error("three epochs"),
             Catch::StartsWith("scheme.dgc.warmup: 'three epochs' does not start with a number"));
  CHECK_THAT(Error("-1 rounds"), Catch::StartsWith("scheme.dgc.warmup: '-1 rounds' is negative"));
  CHECK_THAT(Error("150%"), Catch::StartsWith("scheme.dgc.warmup: '150%' is more than the whole job"));
  CHECK_THAT(Error("inf epochs"), Catch::Contains("does not start with a number"));
  CHECK_THAT(Error("[4 epochs, 2 weeks]"), Catch::StartsWith("scheme.dgc.warmup[1]: '2 weeks' has no unit"));
  CHECK_THAT(Error("[]"), Catch::StartsWith("scheme.dgc.warmup: expected a span"));
  CHECK_THAT(Error("{a: 1}"), Catch::StartsWith("scheme.dgc.warmup: expected a span"));
  CHECK_THAT(Error("[[1 round]]"), Catch::StartsWith("scheme.dgc.warmup[0]: expected a span"));
}

TEST_CASE("ConfigReader reads a JobSpan and names its key", "[job_span][config]") {
  YAML::Node n = YAML::Load("warmup: [2 epochs, 5%]\nbad: 7\n");
  ConfigReader r(n, "scheme.sdagc");
  JobSpan warmup, absent = JobSpan::Rounds(3), bad;
  REQUIRE(r.Get("warmup", warmup).ok());
  REQUIRE(r.Get("absent", absent).ok());
  CHECK(warmup.Text() == "[2 epochs, 5%]");
  CHECK(absent.Text() == "3 rounds");  // the default stays
  CHECK(std::string(r.Get("bad", bad).message()).rfind("scheme.sdagc.bad: '7' has no unit", 0) == 0);
}

TEST_CASE("A span key or its round-1 key: either is read, both are refused naming the old key", "[job_span][config]") {
  auto read = [](const std::string& yaml, JobSpan& span) {
    ConfigReader r(YAML::Load(yaml), "scheme.dgc");
    return sketchps::ReadSpanOrLegacy(r, "warmup", "warmup_epochs", JobSpan::Unit::kEpochs, span);
  };
  JobSpan span = JobSpan::Rounds(3);
  auto none = read("other: 1\n", span);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  CHECK(span.Text() == "3 rounds");  // neither key: the default stays
  auto fresh = read("warmup: 10%\n", span);
  REQUIRE(fresh.ok());
  CHECK_FALSE(fresh->has_value());
  CHECK(span.Text() == "10%");
  auto old = read("warmup_epochs: 2.5\n", span);
  REQUIRE(old.ok());
  CHECK(old->value() == 2.5);
  CHECK(span.Text() == "2.5 epochs");
  CHECK(read("warmup: 1 epoch\nwarmup_epochs: 1\n", span).status().message() ==
        "scheme.dgc.warmup_epochs: give warmup or warmup_epochs, not both");
  CHECK(read("warmup_epochs: -1\n", span).status().message() == "scheme.dgc.warmup_epochs: must be >= 0, got -1");
  CHECK(read("warmup_epochs: .nan\n", span).status().message() ==
        "scheme.dgc.warmup_epochs: expected a finite number, got '.nan'");
}
