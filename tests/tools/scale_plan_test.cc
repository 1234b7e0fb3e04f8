// The membership schedule of `sketchps run --scale` (tools/scale_plan.h).
#include "tools/scale_plan.h"

#include <catch2/catch.hpp>

using namespace sketchps::tools;

TEST_CASE("A scale plan opens new slots going up and closes the highest going down", "[scale]") {
  auto plan = ScalePlan::Make(4, {"120:6", "240:3", "300:5"});
  REQUIRE(plan.ok());
  CHECK(plan->initial() == 4);
  CHECK(plan->slots() == 8);  // slots 6 and 7 open at 300: a slot joins once
  CHECK(plan->WorkerFlags(0).empty());
  CHECK(plan->WorkerFlags(3) == std::vector<std::string>{"--leave-at-round", "240"});
  CHECK(plan->WorkerFlags(4) == std::vector<std::string>{"--join-at-round", "120", "--leave-at-round", "240"});
  CHECK(plan->WorkerFlags(6) == std::vector<std::string>{"--join-at-round", "300"});
  CHECK(plan->Overrides() == std::vector<std::string>{"ps.elastic=true", "workers=8", "ps.initial_workers=4"});
  // The members at each round, counted from the spans, follow the schedule.
  auto members = [&](std::uint64_t round) {
    int n = 0;
    for (const auto& s : plan->spans()) n += s.join <= round && (s.leave == 0 || round < s.leave) ? 1 : 0;
    return n;
  };
  CHECK(members(0) == 4);
  CHECK(members(119) == 4);
  CHECK(members(120) == 6);
  CHECK(members(240) == 3);
  CHECK(members(300) == 5);
}

TEST_CASE("Bad scale steps are refused naming --scale", "[scale]") {
  for (const char* bad : {"120", "x:3", "120:0", "0:3", "120:4"}) {
    auto plan = ScalePlan::Make(4, {bad});
    CHECK_FALSE(plan.ok());
    CHECK(plan.status().message().find("--scale") != std::string::npos);
  }
  CHECK_FALSE(ScalePlan::Make(4, {"120:6", "100:3"}).ok());  // rounds must increase
  auto late = ScalePlan::Make(4, {"120:6"}, 100);
  REQUIRE_FALSE(late.ok());
  CHECK(late.status().message() == "--scale 120:6: the job has 100 rounds");
}
