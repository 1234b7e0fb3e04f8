// `sketchps launch`: the launcher library (launch/) for programs that are not C++, so that a Python
// harness (bench/e2e, through launch/py/launcher.py) starts the daemons exactly as `sketchps run`
// does. (deploy/emulate runs the compose file's own commands instead, which is what it emulates.)
//
//   sketchps launch argv server --shard 1 --job job.yaml --port-file p.json [--tls-dir D] ...
//   sketchps launch argv worker --rank 0 --world-size 4 --servers a:1,b:2 ...
//       print the daemon's command line as a JSON array (its binary found as launch/binaries.h says)
//   sketchps launch ports FILE [--wait SECONDS]
//       print a port file's ports as JSON (common/net/port_file.h), waiting for it to appear
// Exit 0 with the JSON on stdout; 2 for bad flags or a binary not found; 1 when the wait times out.
#pragma once

#include <functional>

// CLI11 is header-only and costs every includer 5 to 6 s of parsing; callers that build a command
// line include <CLI/CLI.hpp> themselves.
namespace CLI {
class App;
}  // namespace CLI

namespace sketchps::tools {

// Adds the `launch` subcommand; `run` is set to the code to run once the command line is parsed.
void AddLaunchCommand(CLI::App& app, std::function<int()>& run);

}  // namespace sketchps::tools
