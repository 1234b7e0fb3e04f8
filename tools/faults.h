// Fault injection and the record of what went wrong, for `sketchps run` (tools/run.h):
//   --kill server:<s>@<round>  SIGKILL shard s once rank 0 has finished `round` rounds, restart it;
//   --kill worker:<r>@<round>  SIGKILL worker r; in ps mode restart it (it restores its state from
//                              its state file: tools/local_cluster.h), in decentralized mode for
//                              good (its exit does not fail the run; its peers regroup without it).
//                              Refused up front in an elastic job (ps.elastic, --scale), where a
//                              restarted slot could not join again and its rounds would wait.
// Shards that exit because their accept loop stalled are restarted too (RestartStalled).
// faults.json in the run directory records every kill and restart and the first failure that
// followed, with wall-clock times (unix seconds) and rank 0's rounds at that moment. Not thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "launch/child.h"
#include "tools/local_cluster.h"

namespace sketchps::tools {

struct KillSpec {
  std::string role;  // "server" or "worker"
  std::uint32_t index = 0;
  std::uint64_t after_round = 0;
};
// Parses "server:1@20" or "worker:3@20". InvalidArgument naming --kill otherwise.
absl::StatusOr<KillSpec> ParseKillSpec(const std::string& text);

class Faults {
 public:
  // Checks every --kill against the job: InvalidArgument naming it.
  static absl::StatusOr<Faults> Plan(const std::vector<std::string>& kills, const JobSpec& job);

  // Kills what is due once rank 0 has finished `rounds_done` rounds. A kill first due when rank 0 has
  // already finished the job's last round (short rounds run past it between two polls) is not done:
  // said on stderr and recorded under "kills_not_done" (a shard killed then would restart with
  // nothing to serve, and the workers' leaving would fail).
  void Inject(std::uint64_t rounds_done, LocalCluster& cluster);
  // Starts again the shards whose accept loop stalled (LocalCluster::RestartStalledServers), says so
  // and records it.
  void RestartStalled(LocalCluster& cluster, std::uint64_t rounds_done);
  // Records `failure` (the first one; prints it with its log's end). Returns 1, the run's exit code.
  int Failed(const Failure& failure, std::uint64_t rounds_done);

  // Workers killed on purpose and not restarted: their exit does not fail the run.
  const std::set<std::uint32_t>& killed_workers() const { return killed_workers_; }
  // faults.json's content (empty when nothing happened).
  const nlohmann::json& record() const { return record_; }
  // Writes faults.json into `out` when something happened; the error names the file.
  absl::Status Write(const std::filesystem::path& out) const;

 private:
  std::vector<KillSpec> kills_;
  std::vector<bool> done_;
  std::uint64_t total_rounds_ = 0;
  std::set<std::uint32_t> killed_workers_;
  nlohmann::json record_ = nlohmann::json::object();
};

}  // namespace sketchps::tools
