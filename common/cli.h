// Command-line pieces shared by the daemons and the front end (CLI11).
//
//   --job FILE      the job spec (env SKETCHPS_JOB; empty: the embedded default job)
//   --set KEY=VALUE overrides one job-spec key, repeatable ("scheme.name=topk")
//   --log-level     trace|debug|info|warn|error (env SKETCHPS_LOG_LEVEL; default info)
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace sketchps {

struct JobFlags {
  std::string job_path;
  std::vector<std::string> overrides;
  std::string log_level = "info";
};

void AddJobFlags(CLI::App& app, JobFlags& flags);
// Sets spdlog's level and a pattern that names the process ("[server 1]"); call after parsing.
void ConfigureLogging(const JobFlags& flags, const std::string& process_name);

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and every thread it starts afterwards;
// call first in main(), then WaitForTerminationSignal() receives them synchronously.
void BlockTerminationSignals();
// Waits for one of them; returns its name ("SIGTERM").
std::string WaitForTerminationSignal();
// Non-blocking: the name of a pending termination signal, or "" when none.
std::string PendingTerminationSignal();

}  // namespace sketchps
