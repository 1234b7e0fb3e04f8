#include "bench/loadgen/machine.h"

#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status.h"
#include "kernels/backend.h"
#include "kernels/bandwidth.h"

namespace sketchps::bench {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The value after the colon of the first line of `path` that starts with `key`.
std::string FirstLine(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, key)) continue;
    const auto colon = line.find(':');
    return std::string(absl::StripAsciiWhitespace(colon == std::string::npos ? line : line.substr(colon + 1)));
  }
  return "";
}

// Sets the OpenMP thread count for its lifetime (0: leave it).
class OmpThreads {
 public:
  explicit OmpThreads(int threads) {
#if defined(_OPENMP)
    before_ = omp_get_max_threads();
    if (threads > 0) omp_set_num_threads(threads);
#else
    (void)threads;
#endif
  }
  ~OmpThreads() {
#if defined(_OPENMP)
    omp_set_num_threads(before_);
#endif
  }

 private:
  int before_ = 0;
};

}  // namespace

nlohmann::json MachineInfo() {
  utsname u{};
  uname(&u);
  return nlohmann::json{{"cpu", FirstLine("/proc/cpuinfo", "model name")},
                        {"cores", std::thread::hardware_concurrency()},
                        {"memory", FirstLine("/proc/meminfo", "MemTotal")},
                        {"kernel", absl::StrCat(u.sysname, " ", u.release)},
                        {"hostname", u.nodename}};
}

std::string LoadAverage() {
  const std::string s = ReadFile("/proc/loadavg");
  std::vector<std::string> f = absl::StrSplit(s, ' ');
  return f.size() >= 3 ? absl::StrCat(f[0], " ", f[1], " ", f[2]) : s;
}

std::string UtcNow() { return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()); }

absl::StatusOr<double> StreamBytesPerSecond(std::size_t floats, int threads, int repeats) {
  const OmpThreads scope(threads);
  std::vector<float> host(floats);
  for (std::size_t i = 0; i < floats; ++i) host[i] = static_cast<float>(i % 1024) * 1e-3f - 0.5f;
  kernels::DeviceArray<float> x(host);
  kernels::Scratch scratch;
  const kernels::Exec exec{nullptr, &scratch};
  std::vector<double> times;
  for (int i = 0; i <= repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    SKETCHPS_RETURN_IF_ERROR(kernels::BandwidthSum(x.data(), floats, exec).status());
    kernels::Synchronize(exec);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (i > 0) times.push_back(s);  // the first pass warms up
  }
  std::sort(times.begin(), times.end());
  return static_cast<double>(floats * sizeof(float)) / times[times.size() / 2];
}

}  // namespace sketchps::bench
