#include "common/net/metrics_http.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <exception>
#include <fstream>
#include <optional>
#include <sstream>

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/version.h"

namespace sketchps {
namespace {

prometheus::MetricFamily Family(std::string name, std::string help, prometheus::MetricType type, double value) {
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return prometheus::MetricFamily{std::move(name), std::move(help), type, {metric}};
}

// Fields of /proc/self/stat after the command name (which may hold spaces): index 0 is the state.
std::vector<std::string> StatFields() {
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return {};
  return absl::StrSplit(text.substr(close + 2), ' ', absl::SkipEmpty());
}

std::optional<double> BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("btime ", 0) == 0) return std::stod(line.substr(6));
  }
  return std::nullopt;
}

double OpenFds() {
  double n = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (readdir(dir) != nullptr) ++n;
    closedir(dir);
    n -= 3;  // ".", ".." and the descriptor of the listing itself
  }
  return n;
}

class Standard : public prometheus::Collectable {
 public:
  explicit Standard(std::string role) : role_(std::move(role)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    using prometheus::MetricType;
    prometheus::MetricFamily info =
        Family("sketchps_build_info", "Build of this process (value 1)", MetricType::Gauge, 1);
    info.metric[0].label = {{"role", role_}, {"version", Version()}};
    std::vector<prometheus::MetricFamily> out{std::move(info)};
    // stat fields (man 5 proc, numbered from 3 = state): utime 14, stime 15, starttime 22, vsize 23, rss 24.
    const std::vector<std::string> f = StatFields();
    const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
    if (f.size() > 21 && tick > 0) {
      try {
        out.push_back(Family("process_cpu_seconds_total", "User and system CPU time spent in seconds",
                             MetricType::Counter, (std::stod(f[11]) + std::stod(f[12])) / tick));
        out.push_back(Family("process_virtual_memory_bytes", "Virtual memory size in bytes", MetricType::Gauge,
                             std::stod(f[20])));
        out.push_back(Family("process_resident_memory_bytes", "Resident memory size in bytes", MetricType::Gauge,
                             std::stod(f[21]) * page));
        if (auto boot = BootTimeSeconds()) {
          out.push_back(Family("process_start_time_seconds", "Start time of the process since unix epoch in seconds",
                               MetricType::Gauge, *boot + std::stod(f[19]) / tick));
        }
      } catch (const std::exception&) {
        // An unreadable value is left out.
      }
    }
    out.push_back(Family("process_open_fds", "Number of open file descriptors", MetricType::Gauge, OpenFds()));
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
      out.push_back(Family("process_max_fds", "Maximum number of open file descriptors", MetricType::Gauge,
                           static_cast<double>(limit.rlim_cur)));
    }
    return out;
  }

 private:
  std::string role_;
};

}  // namespace

std::shared_ptr<prometheus::Collectable> StandardMetrics(const std::string& role) {
  return std::make_shared<Standard>(role);
}

std::string ExpositionText(const std::vector<std::shared_ptr<prometheus::Collectable>>& collectables) {
  std::vector<prometheus::MetricFamily> families;
  for (const auto& c : collectables) {
    auto more = c->Collect();
    families.insert(families.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  return prometheus::TextSerializer().Serialize(families);
}

MetricsEndpoint::MetricsEndpoint() = default;
MetricsEndpoint::MetricsEndpoint(MetricsEndpoint&&) noexcept = default;
MetricsEndpoint& MetricsEndpoint::operator=(MetricsEndpoint&&) noexcept = default;
MetricsEndpoint::~MetricsEndpoint() = default;

absl::StatusOr<MetricsEndpoint> ServeMetricsAt(const std::string& flag, const std::string& address,
                                               std::vector<std::shared_ptr<prometheus::Collectable>> collectables) {
  MetricsEndpoint endpoint;
  try {
    endpoint.exposer = std::make_unique<prometheus::Exposer>(address);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(flag, " ", address, ": cannot serve metrics: ", e.what()));
  }
  for (const auto& c : collectables) endpoint.exposer->RegisterCollectable(c);
  endpoint.collectables = std::move(collectables);
  const auto ports = endpoint.exposer->GetListeningPorts();
  endpoint.port = ports.empty() ? 0 : ports.front();
  return endpoint;
}

}  // namespace sketchps
