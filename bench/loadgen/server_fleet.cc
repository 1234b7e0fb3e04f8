#include "bench/loadgen/server_fleet.h"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "bench/loadgen/metrics_scrape.h"
#include "common/status.h"
#include "launch/daemon_args.h"
#include "launch/ports.h"

namespace sketchps::bench {
namespace fs = std::filesystem;
namespace {

fs::path PortFile(const std::string& dir, std::uint32_t shard) {
  return fs::path(dir) / absl::StrCat("server-", shard, ".port");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServerFleet>> ServerFleet::Start(const FleetOptions& options) {
  std::unique_ptr<ServerFleet> fleet(new ServerFleet());
  fleet->dir_ = options.dir;
  for (std::uint32_t s = 0; s < options.servers; ++s) SKETCHPS_RETURN_IF_ERROR(fleet->Launch(options, s));
  {
    std::ofstream pids(fs::path(options.dir) / "server.pids");
    for (const auto& c : fleet->servers_) pids << c.pid() << "\n";
  }
  const absl::Time deadline = absl::Now() + options.start_timeout;
  for (std::uint32_t s = 0; s < options.servers; ++s) SKETCHPS_RETURN_IF_ERROR(fleet->AwaitServing(s, deadline));
  return fleet;
}

ServerFleet::~ServerFleet() { Stop(); }

absl::Status ServerFleet::Launch(const FleetOptions& options, std::uint32_t shard) {
  const fs::path port_file = PortFile(options.dir, shard);
  std::error_code ec;
  fs::remove(port_file, ec);
  launch::ServerLaunch l;
  l.binary = options.server_bin;
  l.job_path = (fs::path(options.dir) / "job.yaml").string();
  l.shard = shard;
  l.port_file = port_file.string();
  l.metrics_listen = "127.0.0.1:0";
  l.max_wait_seconds = 60;
  l.idle_exit_seconds = options.idle_exit_seconds;
  l.log_level = "info";
  SKETCHPS_ASSIGN_OR_RETURN(
      launch::Child child,
      launch::Child::Start(absl::StrCat("server ", shard), launch::ServerArgv(l),
                           (fs::path(options.dir) / absl::StrCat("server-", shard, ".log")).string(),
                           launch::ChildEnv(1)));
  servers_.push_back(std::move(child));
  return absl::OkStatus();
}

absl::Status ServerFleet::AwaitServing(std::uint32_t shard, absl::Time deadline) {
  SKETCHPS_ASSIGN_OR_RETURN(const PortReport ports,
                            launch::AwaitPortFile(servers_[shard], PortFile(dir_, shard).string(),
                                                  std::max(absl::ZeroDuration(), deadline - absl::Now())));
  if (ports.metrics == 0) {
    return absl::InternalError(absl::StrCat("server ", shard, ": its port file names no metrics port"));
  }
  addresses_.push_back(absl::StrCat("127.0.0.1:", ports.grpc));
  metrics_ports_.push_back(ports.metrics);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ServerTotals>> ServerFleet::Scrape() const {
  std::vector<ServerTotals> out;
  for (std::uint32_t s = 0; s < metrics_ports_.size(); ++s) {
    SKETCHPS_ASSIGN_OR_RETURN(const std::string text, ScrapeMetrics(metrics_ports_[s]));
    const std::map<std::string, std::string> label{{"shard", std::to_string(s)}};
    SKETCHPS_ASSIGN_OR_RETURN(const double in, PrometheusValue(text, "sketchps_bytes_in_total", label));
    SKETCHPS_ASSIGN_OR_RETURN(const double bytes_out, PrometheusValue(text, "sketchps_bytes_out_total", label));
    out.push_back(ServerTotals{in, bytes_out});
  }
  return out;
}

absl::Status ServerFleet::AwaitExit(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  bool running = true;
  while (running && absl::Now() < deadline) {
    running = false;
    for (auto& c : servers_) running = running || !c.Poll().has_value();
    if (running) absl::SleepFor(absl::Milliseconds(20));
  }
  for (std::uint32_t s = 0; s < servers_.size(); ++s) {
    launch::Child& c = servers_[s];
    const bool exited = c.Poll().has_value();
    const int code = exited ? *c.Poll() : c.Stop(absl::Seconds(20));
    if (code != 0) {
      return absl::InternalError(absl::StrCat(
          "server ", s, exited ? " exited with code " : " did not exit after every worker left; stopped, code ", code,
          "; last log lines:\n", c.LogTail(10)));
    }
  }
  return absl::OkStatus();
}

void ServerFleet::Stop() {
  for (auto& c : servers_) c.Signal(SIGTERM);  // all at once: they drain in parallel
  for (auto& c : servers_) {
    if (!c.Poll()) c.Stop(absl::Seconds(20));
  }
}

}  // namespace sketchps::bench
