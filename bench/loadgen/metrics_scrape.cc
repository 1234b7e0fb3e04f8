#include "bench/loadgen/metrics_scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status.h"

namespace sketchps::bench {

namespace {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// `{a="1",b="2"}` (without the braces) into a map; malformed pairs are skipped.
std::map<std::string, std::string> ParseLabels(absl::string_view body) {
  std::map<std::string, std::string> out;
  for (absl::string_view pair : absl::StrSplit(body, ',', absl::SkipEmpty())) {
    const std::size_t eq = pair.find('=');
    if (eq == absl::string_view::npos) continue;
    absl::string_view value = absl::StripAsciiWhitespace(pair.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    out[std::string(absl::StripAsciiWhitespace(pair.substr(0, eq)))] = std::string(value);
  }
  return out;
}

// One sample line `name{labels} value [timestamp]`; nullopt for comments, blank or malformed lines.
std::optional<Sample> ParseSample(absl::string_view line) {
  line = absl::StripAsciiWhitespace(line);
  if (line.empty() || line[0] == '#') return std::nullopt;
  const std::size_t name_end = line.find_first_of("{ \t");
  if (name_end == absl::string_view::npos) return std::nullopt;
  Sample s;
  s.name = std::string(line.substr(0, name_end));
  absl::string_view rest = line.substr(name_end);
  if (!rest.empty() && rest[0] == '{') {
    const std::size_t close = rest.find('}');
    if (close == absl::string_view::npos) return std::nullopt;
    s.labels = ParseLabels(rest.substr(1, close - 1));
    rest = rest.substr(close + 1);
  }
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(rest), absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (fields.empty() || !absl::SimpleAtod(fields[0], &s.value)) return std::nullopt;
  return s;
}

bool HasLabels(const Sample& s, const std::map<std::string, std::string>& wanted) {
  for (const auto& [k, v] : wanted) {
    auto it = s.labels.find(k);
    if (it == s.labels.end() || it->second != v) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<double> PrometheusValue(const std::string& text, const std::string& name,
                                       const std::map<std::string, std::string>& labels) {
  bool found = false;
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const std::optional<Sample> s = ParseSample(line);
    if (!s || s->name != name || !HasLabels(*s, labels)) continue;
    sum += s->value;
    found = true;
  }
  if (!found) return absl::NotFoundError(absl::StrCat("metric ", name, " not in the exposition"));
  return sum;
}

namespace {

// Closes a socket when it goes out of scope.
struct Socket {
  int fd = -1;
  ~Socket() {
    if (fd >= 0) close(fd);
  }
};

std::string Where(int port) { return absl::StrCat("metrics on 127.0.0.1:", port); }

absl::Status Connect(const Socket& s, int port, int timeout_ms) {
  if (s.fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(s.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(absl::StrCat(Where(port), ": connect: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Everything the peer sends until it closes the connection.
absl::StatusOr<std::string> ReadAll(const Socket& s, int port) {
  std::string response;
  char buf[16384];
  for (;;) {
    const ssize_t n = recv(s.fd, buf, sizeof(buf), 0);
    if (n == 0) return response;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::DeadlineExceededError(absl::StrCat(Where(port), ": read: ", std::strerror(errno)));
    response.append(buf, static_cast<std::size_t>(n));
  }
}

// The body of an HTTP/1.x 200 response.
absl::StatusOr<std::string> HttpBody(const std::string& response, int port) {
  const std::size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos || response.rfind("HTTP/1.", 0) != 0) {
    return absl::DataLossError(absl::StrCat(Where(port), ": not an HTTP response"));
  }
  const std::size_t sp = response.find(' ');
  if (sp == std::string::npos || response.compare(sp + 1, 3, "200") != 0) {
    return absl::UnavailableError(absl::StrCat(Where(port), ": ", response.substr(0, response.find('\r'))));
  }
  return response.substr(body + 4);
}

}  // namespace

absl::StatusOr<std::string> ScrapeMetrics(int port, int timeout_ms) {
  const Socket s{socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  SKETCHPS_RETURN_IF_ERROR(Connect(s, port, timeout_ms));
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (send(s.fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    return absl::UnavailableError(absl::StrCat(Where(port), ": send failed"));
  }
  SKETCHPS_ASSIGN_OR_RETURN(const std::string response, ReadAll(s, port));
  return HttpBody(response, port);
}

}  // namespace sketchps::bench
