// CheckEvaluationShare (session/session.h): a rank's evaluation counts are checked before they are
// summed over the workers, so a diverged model (a loss that overflowed to inf or became nan) is named
// as such instead of being refused on the wire as a non-finite payload.
#include <cmath>
#include <limits>
#include <string>

#include <catch2/catch.hpp>

#include "session/session.h"

namespace sketchps::session {
namespace {

TEST_CASE("An evaluation share that is not finite names the value and the divergence", "[session]") {
  CHECK(CheckEvaluationShare(11, 1500, 2000, 812.5).ok());
  CHECK(CheckEvaluationShare(0, 0, 1, 0).ok());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const absl::Status lost = CheckEvaluationShare(11, 1500, 2000, nan);
  CHECK(absl::IsInvalidArgument(lost));
  const std::string message(lost.message());
  CHECK(message.find("evaluation after round 12") != std::string::npos);
  CHECK(message.find("loss_sum is nan") != std::string::npos);
  CHECK(message.find("diverged") != std::string::npos);
  CHECK(std::string(CheckEvaluationShare(3, 10, 20, inf).message()).find("loss_sum is inf") != std::string::npos);
  CHECK(std::string(CheckEvaluationShare(3, nan, 20, 1).message()).find("correct is nan") != std::string::npos);
}

}  // namespace
}  // namespace sketchps::session
