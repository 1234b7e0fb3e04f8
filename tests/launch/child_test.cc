// Child processes (launch/child.h): StopTogether, the teardown of a failed run, signals every child
// at once and kills the ones that ignore SIGTERM once the grace has passed.
#include "launch/child.h"

#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/time/clock.h"

using namespace sketchps::launch;
namespace fs = std::filesystem;

TEST_CASE("StopTogether ends every child, killing one that ignores SIGTERM after the grace", "[launch]") {
  const fs::path dir = fs::temp_directory_path() / ("sketchps-child-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<Child> children;
  for (const std::string script : {"exec sleep 60", "exec sleep 60", "trap '' TERM; echo ready; exec sleep 60"}) {
    auto child = Child::Start("child " + std::to_string(children.size()), {"/bin/sh", "-c", script},
                              (dir / ("child-" + std::to_string(children.size()) + ".log")).string());
    REQUIRE(child.ok());
    children.push_back(std::move(*child));
  }
  // The third shell has set its trap once it says so (bounded wait).
  for (int i = 0; i < 500 && children[2].LogTail(1) != "ready"; ++i) absl::SleepFor(absl::Milliseconds(20));
  REQUIRE(children[2].LogTail(1) == "ready");
  std::vector<Child*> all;
  for (auto& c : children) all.push_back(&c);
  const absl::Time start = absl::Now();
  StopTogether(all, absl::Seconds(1));
  CHECK(children[0].Poll().value_or(-1) == 128 + SIGTERM);
  CHECK(children[1].Poll().value_or(-1) == 128 + SIGTERM);
  CHECK(children[2].Poll().value_or(-1) == 128 + SIGKILL);
  CHECK(absl::Now() - start < absl::Seconds(30));  // generous: far below the children's own 60 s
  StopTogether(all, absl::Seconds(1));             // all gone: returns at once
  fs::remove_all(dir);
}
