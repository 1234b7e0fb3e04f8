// The step schedule of the peer collectives: sends and receives pair up, every rank ends covering
// every rank exactly once (simulated with rank sets), nobody sends more than ceil(log2 P) times, and
// SentBlock describes what the simulation actually sends.
#include "peer/schedule.h"

#include <map>
#include <set>

#include <catch2/catch.hpp>

using namespace sketchps::peer;

namespace {

std::uint32_t CeilLog2(std::uint32_t p) {
  std::uint32_t l = 0;
  while ((1u << l) < p) ++l;
  return l;
}

}  // namespace

TEST_CASE("Peer schedule: sends and receives pair up at every step", "[peer][schedule]") {
  for (std::uint32_t p = 1; p <= 17; ++p) {
    for (std::uint32_t s = 0; s < NumSteps(p); ++s) {
      for (std::uint32_t r = 0; r < p; ++r) {
        const Step step = StepOf(p, r, s);
        if (step.send_to) {
          INFO("P " << p << " step " << s << " rank " << r);
          REQUIRE(*step.send_to < p);
          CHECK(StepOf(p, *step.send_to, s).recv_from == r);
        }
        if (step.recv_from) CHECK(StepOf(p, *step.recv_from, s).send_to == r);
      }
    }
  }
}

TEST_CASE("Peer schedule: every rank ends with every contribution once and sends at most ceil(log2 P) times",
          "[peer][schedule]") {
  for (std::uint32_t p = 1; p <= 17; ++p) {
    std::vector<std::multiset<std::uint32_t>> cover(p);
    for (std::uint32_t r = 0; r < p; ++r) cover[r] = {r};
    std::vector<std::uint32_t> sends(p, 0);
    for (std::uint32_t s = 0; s < NumSteps(p); ++s) {
      std::map<std::uint32_t, std::multiset<std::uint32_t>> sent;
      for (std::uint32_t r = 0; r < p; ++r) {
        if (!StepOf(p, r, s).send_to) continue;
        sent[r] = cover[r];
        ++sends[r];
        const auto block = SentBlock(p, r, s);
        CHECK(std::multiset<std::uint32_t>(block.begin(), block.end()) == cover[r]);
      }
      for (std::uint32_t r = 0; r < p; ++r) {
        const Step step = StepOf(p, r, s);
        if (!step.recv_from) continue;
        if (step.replace) cover[r].clear();
        cover[r].insert(sent[*step.recv_from].begin(), sent[*step.recv_from].end());
      }
    }
    std::multiset<std::uint32_t> all;
    for (std::uint32_t r = 0; r < p; ++r) all.insert(r);
    for (std::uint32_t r = 0; r < p; ++r) {
      INFO("P " << p << " rank " << r);
      CHECK(cover[r] == all);
      CHECK(sends[r] <= CeilLog2(p));
    }
  }
}

TEST_CASE("Peer schedule: the lower block is combined first", "[peer][schedule]") {
  // P = 6: m = 4; ranks 4, 5 fold into 0, 1; doubling pairs (0,1), (2,3) then (0,2), (1,3).
  CHECK(NumSteps(6) == 4);
  CHECK(DoublingRanks(6) == 4);
  CHECK(StepOf(6, 0, 0).recv_from == 4u);
  CHECK(!StepOf(6, 0, 0).received_first);
  CHECK(StepOf(6, 1, 1).recv_from == 0u);
  CHECK(StepOf(6, 1, 1).received_first);
  CHECK(StepOf(6, 2, 2).recv_from == 0u);
  CHECK(StepOf(6, 5, 3).replace);
  CHECK(SentBlock(6, 0, 2) == std::vector<std::uint32_t>{0, 1, 4, 5});
  CHECK(SentBlock(6, 3, 1) == std::vector<std::uint32_t>{3});
  CHECK(SentBlock(6, 2, 0).empty());
}
