// Helpers for tests that run `sketchps run` (tools/run.h) in-process or as the `sketchps` binary and
// read its run folder: fresh folders under the temporary directory, the options of a quiet run, the
// build tree's binaries, summary.json and the workers' records. Header-only.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "launch/child.h"
#include "tools/run.h"

namespace sketchps::testing {

// <tmp>/sketchps-<suite>-<pid>/<name>, removed first.
inline std::filesystem::path FreshRunDir(const std::string& suite, const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("sketchps-" + suite + "-" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(dir);
  return dir;
}

// A run in `dir` with these overrides: no progress line, no plots, warnings only.
inline tools::RunOptions QuietRun(const std::filesystem::path& dir, std::vector<std::string> overrides) {
  tools::RunOptions o;
  o.out = dir.string();
  o.progress = false;
  o.plots = false;
  o.job.log_level = "warn";
  o.job.overrides = std::move(overrides);
  return o;
}

// The build tree's binary `name` in `folder` (the test binaries live in tests/, its sibling).
inline std::filesystem::path BuildBinary(const std::string& folder, const std::string& name) {
  return std::filesystem::path(launch::SelfExecutable()).parent_path().parent_path() / folder / name;
}

inline std::string ReadText(const std::filesystem::path& file) {
  std::ifstream in(file);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// summary.json of a finished run (null when there is none).
inline nlohmann::json ReadSummaryFile(const std::filesystem::path& dir) {
  std::ifstream in(dir / "summary.json");
  if (!in) return nullptr;
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// Each line of a JSON-lines file, parsed (a line that does not parse is a discarded value).
inline std::vector<nlohmann::json> JsonLinesOf(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) {
    out.push_back(nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false));
  }
  return out;
}

// Waits up to `seconds` for `child` to exit; its exit status, or -1 if it still runs.
inline int WaitForExit(launch::Child& child, double seconds) {
  for (int i = 0; i < static_cast<int>(seconds * 20); ++i) {
    if (auto rc = child.Poll()) return *rc;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

// The small job these tests run: the MLP, 2 workers, 2 shards, top-k with error feedback (state on the
// workers), no evaluation but the last, `rounds` rounds, a checkpoint every `every` rounds.
inline std::vector<std::string> SmallTopkJob(const std::string& job_id, int rounds, int every) {
  return {"model=mlp",
          "workers=2",
          "servers=2",
          "scheme.name=topk",
          "train.rounds=" + std::to_string(rounds),
          "train.eval_every_rounds=0",
          "checkpoint.every_rounds=" + std::to_string(every),
          "job_id=" + job_id};
}

// `sketchps run --no-progress --no-plot --insecure --out DIR` with `--set` for each override, plus
// `extra` flags: the argv of the front end as a user types it.
inline std::vector<std::string> RunArgv(const std::filesystem::path& dir, const std::vector<std::string>& overrides,
                                        const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv{BuildBinary("tools", "sketchps").string(),
                                "run",
                                "--no-progress",
                                "--no-plot",
                                "--insecure",
                                "--log-level",
                                "info",
                                "--out",
                                dir.string()};
  for (const std::string& o : overrides) argv.insert(argv.end(), {"--set", o});
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// Starts `sketchps run` (RunArgv) on `dir` and sends it SIGINT (Ctrl-C) once worker 0 has recorded
// `after` rounds; returns its exit status: 130 when it stopped as an interrupted run should, -2
// when it ended before the interrupt or never got that far (4 minutes), -1 when it did not stop.
inline int RunUntilInterrupted(const std::filesystem::path& dir, const std::vector<std::string>& overrides,
                               std::size_t after) {
  std::filesystem::create_directories(dir.parent_path());
  auto launcher = launch::Child::Start("sketchps run", RunArgv(dir, overrides),
                                       (dir.parent_path() / (dir.filename().string() + "-launcher.log")).string());
  if (!launcher.ok()) return -2;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(4);
  while (JsonLinesOf(dir / "worker-0.jsonl").size() < after) {
    if (launcher->Poll() || std::chrono::steady_clock::now() > deadline) return -2;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  launcher->Signal(SIGINT);
  return WaitForExit(*launcher, 60);
}

}  // namespace sketchps::testing
