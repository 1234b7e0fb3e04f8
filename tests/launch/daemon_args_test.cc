#include "launch/daemon_args.h"

#include <algorithm>

#include <catch2/catch.hpp>

using namespace sketchps::launch;

namespace {

// The value after `flag` in `argv` ("" when the flag is absent).
std::string ValueOf(const std::vector<std::string>& argv, const std::string& flag) {
  const auto it = std::find(argv.begin(), argv.end(), flag);
  return it == argv.end() || it + 1 == argv.end() ? "" : *(it + 1);
}

}  // namespace

TEST_CASE("Daemon command lines pass the checkpoint key file only when one is set", "[launch]") {
  ServerLaunch s;
  s.binary = "sketchps-server";
  CHECK(ValueOf(ServerArgv(s), "--checkpoint-key-file").empty());
  s.checkpoint_dir = "/run/ckpt";
  s.checkpoint_key_file = "/run/checkpoint.key";
  CHECK(ValueOf(ServerArgv(s), "--checkpoint-key-file") == "/run/checkpoint.key");
  CHECK(ValueOf(ServerArgv(s), "--checkpoint-dir") == "/run/ckpt");

  WorkerLaunch w;
  w.binary = "sketchps-worker";
  CHECK(ValueOf(WorkerArgv(w), "--checkpoint-key-file").empty());
  w.state_dir = "/run/state";
  w.checkpoint_key_file = "/run/checkpoint.key";
  CHECK(ValueOf(WorkerArgv(w), "--checkpoint-key-file") == "/run/checkpoint.key");
  CHECK(ValueOf(WorkerArgv(w), "--state-dir") == "/run/state");
}
