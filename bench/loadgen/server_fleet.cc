#include "bench/loadgen/server_fleet.h"

#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/loadgen/metrics_scrape.h"
#include "common/status.h"

namespace sketchps::bench {
namespace fs = std::filesystem;
namespace {

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path PortFile(const std::string& dir, std::uint32_t shard) {
  return fs::path(dir) / absl::StrCat("server-", shard, ".port");
}

// The /metrics port the server logged ("metrics on port N"), or 0 while it has not.
int MetricsPort(const std::string& log) {
  static const std::regex re("metrics on port ([0-9]+)");
  std::smatch m;
  int port = 0;
  if (std::regex_search(log, m, re)) absl::SimpleAtoi(m[1].str(), &port);
  return port;
}

}  // namespace

absl::StatusOr<std::string> FindServerBinary(const std::string& bin_dir) {
  std::vector<fs::path> candidates;
  if (!bin_dir.empty()) {
    candidates.push_back(fs::path(bin_dir) / "sketchps-server");
  } else {
    const fs::path self = fs::path(SelfExecutable()).parent_path();
    candidates = {self / "sketchps-server", self.parent_path() / "server" / "sketchps-server"};
  }
  std::vector<std::string> tried;
  for (const auto& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return c.string();
    tried.push_back(c.string());
  }
  return absl::NotFoundError(
      absl::StrCat("sketchps-server not found (tried ", absl::StrJoin(tried, ", "), "); use --bin-dir"));
}

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
  std::vector<std::string> argv{options.server_bin,
                                "--job",
                                (fs::path(options.dir) / "job.yaml").string(),
                                "--shard",
                                std::to_string(shard),
                                "--listen",
                                "127.0.0.1:0",
                                "--port-file",
                                port_file.string(),
                                "--metrics-listen",
                                "127.0.0.1:0",
                                "--insecure",
                                "--max-wait-seconds",
                                "60",
                                "--idle-exit-seconds",
                                absl::StrFormat("%.0f", options.idle_exit_seconds),
                                "--log-level",
                                "info"};
  SKETCHPS_ASSIGN_OR_RETURN(Child child,
                            Child::Start(absl::StrCat("server ", shard), std::move(argv),
                                         (fs::path(options.dir) / absl::StrCat("server-", shard, ".log")).string(),
                                         {"OMP_NUM_THREADS=1", "OMP_WAIT_POLICY=PASSIVE"}));
  servers_.push_back(std::move(child));
  return absl::OkStatus();
}

absl::Status ServerFleet::AwaitServing(std::uint32_t shard, absl::Time deadline) {
  Child& child = servers_[shard];
  int port = 0, metrics = 0;
  while (port == 0 || metrics == 0) {
    if (auto code = child.Poll()) {
      return absl::UnavailableError(absl::StrCat("server ", shard, " exited with code ", *code,
                                                 " before serving; last log lines:\n", child.LogTail(10)));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("server ", shard, " not serving in time; last log lines:\n", child.LogTail(10)));
    }
    const fs::path port_file = PortFile(dir_, shard);
    if (port == 0 && fs::exists(port_file)) absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(port_file)), &port);
    if (port != 0) metrics = MetricsPort(ReadFile(child.log_path()));
    if (port == 0 || metrics == 0) absl::SleepFor(absl::Milliseconds(20));
  }
  addresses_.push_back(absl::StrCat("127.0.0.1:", port));
  metrics_ports_.push_back(metrics);
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
    Child& c = servers_[s];
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
