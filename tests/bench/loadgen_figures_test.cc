// The loadgen's figures from counters (bench/loadgen/figures.h) against hand-computed values, and its
// Prometheus reader and /metrics scrape against a literal exposition and a stand-in HTTP server.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "bench/loadgen/figures.h"
#include "bench/loadgen/metrics_scrape.h"

namespace sketchps::bench {
namespace {

Measurement TwoWorkers() {
  Measurement m;
  m.mode = "ps";
  m.scheme = "gs_sgd";
  m.workers = 2;
  m.servers = 2;
  m.dim = 1000;
  m.density = 0.01;
  m.rounds = 4;
  m.seconds = 2.0;
  m.round_seconds = {0.4, 0.6, 0.5, 0.5};
  // Worker 0: 4000 wire up over 4 rounds, worker 1: 8000.
  m.workers_totals = {WorkerTotals{4000, 2000, 6000, 3000, 6000, 3000, 40},
                      WorkerTotals{8000, 2400, 6000, 3000, 6000, 3000, 44}};
  // Shard 0 has two phases, shard 1 one.
  m.shard_phases = {{PhaseTotals{4000, 1600, 8}, PhaseTotals{800, 400, 8}}, {PhaseTotals{7200, 4000, 8}}};
  m.server_totals = {ServerTotals{6000, 10000}, ServerTotals{12000, 2000}};
  m.stream_bytes_per_second = 1e6;
  return m;
}

TEST_CASE("Derive turns counter deltas into per-round figures") {
  const auto f = Derive(TwoWorkers());
  REQUIRE(f.ok());
  // Means over workers, per round: (4000 + 8000) / 2 / 4.
  CHECK(f->wire_up == Approx(1500));
  CHECK(f->wire_down == Approx(550));
  CHECK(f->raw_up == Approx(1500));
  CHECK(f->raw_down == Approx(750));
  CHECK(f->payload_up == Approx(1500));
  CHECK(f->selected == Approx(10.5));
  CHECK(f->wire_up_min == Approx(1000));
  CHECK(f->wire_up_max == Approx(2000));
  CHECK(f->wire_down_min == Approx(500));
  CHECK(f->wire_down_max == Approx(600));
  // Servers: per round; the busiest link is shard 0's egress (10000 / 4) vs shard 1's ingress (12000 / 4).
  REQUIRE(f->server_in.size() == 2);
  CHECK(f->server_in[1] == Approx(3000));
  CHECK(f->server_out[0] == Approx(2500));
  CHECK(f->busiest_link == Approx(3000));
  CHECK(f->rounds_per_second == Approx(2.0));
  CHECK(f->round_seconds_median == Approx(0.5));
  CHECK(f->phases == 2);
  // Shard 0 merged 16 payloads in 2 s and read 4800 bytes.
  CHECK(f->merges_per_second[0] == Approx(8));
  CHECK(f->merges_per_second[1] == Approx(4));
  CHECK(f->reduce_read_bytes_per_second[0] == Approx(2400));
  CHECK(f->reduce_read_bytes_per_second[1] == Approx(3600));
  CHECK(f->reduce_read_fraction_of_stream[1] == Approx(0.0036));
  // Per worker per round per phase: 4000 / 4 / 2.
  CHECK(f->payload_per_worker_per_phase[0][0] == Approx(500));
  CHECK(f->payload_per_worker_per_phase[0][1] == Approx(100));
  const auto json = ToJson(TwoWorkers(), *f);
  CHECK(json["per_worker_per_round"]["wire_total"].get<double>() == Approx(2050));
  CHECK(json["shards"][0]["phases"][1]["result_bytes_per_worker_per_round"].get<double>() == Approx(50));
  CHECK(json["shards"][1]["server_in_bytes_per_round"].get<double>() == Approx(3000));
}

TEST_CASE("Derive refuses measurements without rounds, time or worker data") {
  Measurement m = TwoWorkers();
  m.rounds = 0;
  CHECK(!Derive(m).ok());
  m = TwoWorkers();
  m.seconds = 0;
  CHECK(!Derive(m).ok());
  m = TwoWorkers();
  m.workers_totals.pop_back();
  CHECK(!Derive(m).ok());
}

constexpr char kExposition[] =
    "# HELP sketchps_bytes_in_total serialized PushPull request bytes\n"
    "# TYPE sketchps_bytes_in_total counter\n"
    "sketchps_bytes_in_total{shard=\"0\"} 1.5e+06\n"
    "sketchps_bytes_in_total{shard=\"1\"} 250\n"
    "sketchps_bytes_in_total_extra{shard=\"0\"} 9\n"
    "sketchps_pushes_total{outcome=\"accepted\",shard=\"0\"} 7\n"
    "sketchps_pushes_total{outcome=\"duplicate\",shard=\"0\"} 2\n"
    "sketchps_rounds_applied{shard=\"0\"} 12 1700000000000\n";

TEST_CASE("PrometheusValue reads samples by name and labels") {
  CHECK(*PrometheusValue(kExposition, "sketchps_bytes_in_total", {{"shard", "0"}}) == Approx(1.5e6));
  CHECK(*PrometheusValue(kExposition, "sketchps_bytes_in_total", {{"shard", "1"}}) == Approx(250));
  // Without labels: the sum of every sample of that name (not of longer names sharing the prefix).
  CHECK(*PrometheusValue(kExposition, "sketchps_bytes_in_total") == Approx(1.5e6 + 250));
  CHECK(*PrometheusValue(kExposition, "sketchps_pushes_total", {{"outcome", "duplicate"}}) == Approx(2));
  CHECK(*PrometheusValue(kExposition, "sketchps_rounds_applied") == Approx(12));  // a timestamp follows
  CHECK(PrometheusValue(kExposition, "sketchps_bytes_out_total").status().code() == absl::StatusCode::kNotFound);
  CHECK(PrometheusValue(kExposition, "sketchps_bytes_in_total", {{"shard", "2"}}).status().code() ==
        absl::StatusCode::kNotFound);
}

// A one-shot HTTP server on a free loopback port that answers with `response`.
class OneShotHttp {
 public:
  explicit OneShotHttp(std::string response) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    REQUIRE(listen(fd_, 1) == 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, response = std::move(response)] {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      std::string got;
      while (got.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        got.append(buf, static_cast<std::size_t>(n));
      }
      request_ = got;
      send(c, response.data(), response.size(), MSG_NOSIGNAL);
      close(c);
    });
  }
  ~OneShotHttp() {
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  const std::string& request() const { return request_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::string request_;
  std::thread thread_;
};

TEST_CASE("ScrapeMetrics returns the body of GET /metrics") {
  std::string body;
  {
    OneShotHttp server(absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n", kExposition));
    auto got = ScrapeMetrics(server.port());
    REQUIRE(got.ok());
    body = *got;
    CHECK(server.request().rfind("GET /metrics HTTP/1.", 0) == 0);
  }
  CHECK(body == kExposition);
  CHECK(*PrometheusValue(body, "sketchps_bytes_in_total", {{"shard", "1"}}) == Approx(250));
}

TEST_CASE("ScrapeMetrics reports a non-200 answer and a closed port") {
  {
    OneShotHttp server("HTTP/1.1 404 Not Found\r\n\r\nnope");
    auto got = ScrapeMetrics(server.port());
    CHECK(!got.ok());
    CHECK(std::string(got.status().message()).find("404") != std::string::npos);
  }
  // A port nothing listens on (bound, never listening).
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  CHECK(ScrapeMetrics(ntohs(addr.sin_port), 1000).status().code() == absl::StatusCode::kUnavailable);
  close(fd);
}

}  // namespace
}  // namespace sketchps::bench
