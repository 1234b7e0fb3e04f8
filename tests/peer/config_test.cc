// PeerConfig: validation names the field; the message limit follows the job's ranges and P.
#include "peer/config.h"

#include <catch2/catch.hpp>

using namespace sketchps;

TEST_CASE("The peer message limit is the largest legal letter of the job, unless set", "[peer]") {
  peer::PeerConfig c;
  c.num_workers = 4;
  c.range_lengths = {1000, 3000};
  // Every rank's sparse contribution to the longest range (16 bytes an entry) plus a sketch of 8
  // float32 cells per element, plus 64 KiB.
  CHECK(c.MessageLimit() == (16 * 4 + 32) * 3000 + (64 << 10));
  c.range_lengths = {std::uint64_t{1} << 31};
  CHECK(c.MessageLimit() == 2047 << 20);
  c.max_message_bytes = 5 << 20;
  CHECK(c.MessageLimit() == 5 << 20);
  c.max_message_bytes = -1;
  const auto status = peer::ValidatePeerConfig(c);
  CHECK(absl::IsInvalidArgument(status));
  CHECK_THAT(std::string(status.message()), Catch::Contains("peer.max_message_bytes"));
}
