// SkippedRounds (worker/skipped_rounds.h): the count, the first round, and which skips are logged,
// against a naive schedule written out here.
#include "worker/skipped_rounds.h"

#include <cstdint>
#include <set>

#include <catch2/catch.hpp>

using sketchps::worker::SkippedRounds;

TEST_CASE("SkippedRounds counts skips, keeps the first and logs the first three then powers of ten", "[worker]") {
  SkippedRounds skipped;
  CHECK(skipped.Describe().empty());
  CHECK_FALSE(skipped.Note(0, false));
  CHECK(skipped.count() == 0);
  CHECK_FALSE(skipped.first().has_value());

  const std::set<std::uint64_t> logged_counts{1, 2, 3, 10, 100, 1000};
  std::uint64_t n = 0;
  for (std::uint64_t round = 5; round < 5 + 2 * 1500; ++round) {
    const bool skip = round % 2 == 1;  // every other round from round 5
    const bool logged = skipped.Note(round, skip);
    if (skip) ++n;
    INFO("round " << round << ", count " << n);
    CHECK(logged == (skip && logged_counts.contains(n)));
  }
  CHECK(skipped.count() == 1500);
  REQUIRE(skipped.first().has_value());
  CHECK(*skipped.first() == 5);
  CHECK(skipped.Describe() == "1500 rounds skipped for a non-finite gradient, the first round 5");

  SkippedRounds one;
  one.Note(0, true);
  CHECK(one.Describe() == "1 round skipped for a non-finite gradient, the first round 0");
}
