// The standard Prometheus families (build and process) and the /metrics text.
#include "common/net/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "common/version.h"

using namespace sketchps;

namespace {

// The value of the sample line that starts with `prefix` (a family name with its labels), or -1.
double Sample(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix + " ", 0) == 0) return std::stod(line.substr(prefix.size() + 1));
  }
  return -1;
}

// The body of GET /metrics on 127.0.0.1:port ("" when the connection fails).
std::string Fetch(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[4096];
      for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) response.append(buffer, static_cast<std::size_t>(n));
    }
  }
  close(fd);
  return response;
}

}  // namespace

TEST_CASE("The standard families name the build and measure this process", "[metrics]") {
  const std::string text = ExpositionText({StandardMetrics("tester")});
  CHECK(Sample(text, std::string("sketchps_build_info{role=\"tester\",version=\"") + Version() + "\"}") == 1);
  // Independent reference: the resident set from /proc/self/statm (pages), read just after.
  std::ifstream statm("/proc/self/statm");
  double pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  const double rss = pages_resident * static_cast<double>(sysconf(_SC_PAGESIZE));
  const double reported = Sample(text, "process_resident_memory_bytes");
  CHECK(reported > 0.5 * rss);
  CHECK(reported < 2.0 * rss);
  CHECK(Sample(text, "process_virtual_memory_bytes") >= reported);
  CHECK(Sample(text, "process_cpu_seconds_total") >= 0);
  CHECK(Sample(text, "process_open_fds") >= 3);  // stdin, stdout, stderr at least
  CHECK(Sample(text, "process_max_fds") >= Sample(text, "process_open_fds"));
  CHECK(Sample(text, "process_start_time_seconds") > 1.6e9);
  CHECK_THAT(text, Catch::Contains("# TYPE process_cpu_seconds_total counter"));
}

TEST_CASE("The endpoint serves /metrics over HTTP, and an address that cannot be bound names the flag", "[metrics]") {
  auto served = ServeMetricsAt("--metrics-listen", "256.0.0.1:0", {StandardMetrics("tester")});
  CHECK(served.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(served.status().message()), Catch::Contains("--metrics-listen 256.0.0.1:0"));
  auto ok = ServeMetricsAt("--metrics-listen", "127.0.0.1:0", {StandardMetrics("tester")});
  REQUIRE(ok.ok());
  REQUIRE(ok->port > 0);
  const std::string text = Fetch(ok->port);
  CHECK_THAT(text, Catch::Contains("sketchps_build_info{role=\"tester\"") && Catch::Contains("process_open_fds"));
}
