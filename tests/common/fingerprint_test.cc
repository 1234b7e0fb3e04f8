// CheckFingerprint (common/wire/fingerprint.h): which keys differ, and the messages a user reads.
#include "common/wire/fingerprint.h"

#include <catch2/catch.hpp>

#include "common/reason.h"

using namespace sketchps;

TEST_CASE("Fingerprints that differ name the keys, equal or empty ones pass", "[fingerprint]") {
  const Fingerprint mine{{"scheme", 1}, {"optimizer", 2}};
  CHECK(CheckFingerprint(mine, mine, "worker 1").ok());
  CHECK(CheckFingerprint(mine, {}, "a tool").ok());
  const absl::Status st = CheckFingerprint(mine, {{"scheme", 1}, {"optimizer", 3}}, "worker 1");
  CHECK(st.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(ReasonOf(st) == Reason::kFingerprintMismatch);
  CHECK_THAT(std::string(st.message()),
             Catch::Contains("worker 1's job differs") && Catch::Contains("optimizer") && !Catch::Contains("scheme"));
}

TEST_CASE("Peers on different kernel backends are refused, naming both backends", "[fingerprint]") {
  const Fingerprint cpu{{"scheme", 1}, {kKernelsKey, 0}};
  const Fingerprint cuda{{"scheme", 1}, {kKernelsKey, 1}};
  CHECK(CheckFingerprint(cuda, cuda, "peer 2").ok());
  const absl::Status st = CheckFingerprint(cpu, cuda, "peer 2");
  CHECK(ReasonOf(st) == Reason::kFingerprintMismatch);
  CHECK_THAT(std::string(st.message()),
             Catch::Contains("peer 2 runs on the cuda kernels and this process on the cpu ones"));
}
