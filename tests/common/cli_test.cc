// Daemon command-line helpers (common/config/cli.h): strict environment numbers, server address lists and
// patterns, exit codes of signals, and the open-files limit raised at start.
#include "common/config/cli.h"

#include <sys/resource.h>

#include <cstdlib>

#include <catch2/catch.hpp>

using namespace sketchps;

TEST_CASE("EnvUint32 accepts only a plain non-negative integer and names the variable", "[cli]") {
  ::unsetenv("SKETCHPS_TEST_N");
  auto unset = EnvUint32("SKETCHPS_TEST_N");
  REQUIRE(unset.ok());
  CHECK_FALSE(unset->has_value());
  ::setenv("SKETCHPS_TEST_N", "12", 1);
  CHECK(EnvUint32("SKETCHPS_TEST_N").value() == std::optional<std::uint32_t>(12));
  for (const char* bad : {"two", "", "-1", "+3", " 4", "4 ", "07", "4294967296"}) {
    ::setenv("SKETCHPS_TEST_N", bad, 1);
    auto got = EnvUint32("SKETCHPS_TEST_N");
    INFO("value '" << bad << "'");
    CHECK(got.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(got.status().message()), Catch::StartsWith("SKETCHPS_TEST_N: '"));
  }
  ::unsetenv("SKETCHPS_TEST_N");
}

TEST_CASE("Server addresses: a list in shard order or one pattern with {shard}", "[cli]") {
  CHECK(ServerAddresses("a:1,b:2", 2).value() == std::vector<std::string>{"a:1", "b:2"});
  CHECK(ServerAddresses("ps-{shard}.ps:7070", 3).value() ==
        std::vector<std::string>{"ps-0.ps:7070", "ps-1.ps:7070", "ps-2.ps:7070"});
  auto short_list = ServerAddresses("a:1", 2);
  CHECK(short_list.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(short_list.status().message()),
             Catch::Contains("--servers: 1 addresses for a job with servers: 2"));
  CHECK_FALSE(ServerAddresses("", 1).ok());
}

TEST_CASE("Signals map to the shell's exit codes", "[cli]") {
  CHECK(TerminationExitCode("SIGTERM") == 143);
  CHECK(TerminationExitCode("SIGINT") == 130);
  CHECK(TerminationExitCode("SIGHUP") == 129);
  CHECK(TerminationExitCode("every worker has finished the job") == 1);
}

TEST_CASE("RaiseFileLimit lifts the soft open-files limit to the hard one", "[cli]") {
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &before) == 0);
  rlimit lowered = before;
  lowered.rlim_cur = std::min<rlim_t>(64, before.rlim_max);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &lowered) == 0);
  CHECK(RaiseFileLimit() == before.rlim_max);
  rlimit after{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &after) == 0);
  CHECK(after.rlim_cur == before.rlim_max);
  setrlimit(RLIMIT_NOFILE, &before);
}
