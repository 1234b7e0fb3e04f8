// The worker's Prometheus families, fed with per-round records as the trainer writes them.
#include "worker/worker_metrics.h"

#include <sstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using sketchps::worker::WorkerMetrics;

namespace {

double Sample(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix + " ", 0) == 0) return std::stod(line.substr(prefix.size() + 1));
  }
  return -1;
}

nlohmann::json Record(int round, double up, double down) {
  return {{"round", round},        {"round_start", 100.0 + round},
          {"time", 100.5 + round}, {"loss", 2.0 / (round + 1)},
          {"bytes_up", up},        {"bytes_down", down},
          {"payload_up", up - 20}, {"payload_down", down - 20},
          {"dense_bytes", 4000.0}, {"compute_s", 0.25},
          {"exchange_s", 0.125},   {"compress_s", 0.0625},
          {"communicate_s", 0.1},  {"workers", 3},
          {"skipped", false}};
}

}  // namespace

TEST_CASE("Worker metrics count rounds, bytes, phase times and compression from the records", "[metrics]") {
  WorkerMetrics metrics(1);
  metrics.ObserveRound(Record(0, 100, 400));
  auto second = Record(1, 300, 400);
  second["test_accuracy"] = 0.75;
  second["eval_s"] = 2.0;
  second["skipped"] = true;
  metrics.ObserveRound(second);
  const std::string t = metrics.Text();
  CHECK(Sample(t, "sketchps_worker_rounds_total{rank=\"1\"}") == 2);
  CHECK(Sample(t, "sketchps_worker_round{rank=\"1\"}") == 1);
  CHECK(Sample(t, "sketchps_worker_workers{rank=\"1\"}") == 3);
  CHECK(Sample(t, "sketchps_worker_wire_bytes_total{direction=\"up\",rank=\"1\"}") == 400);
  CHECK(Sample(t, "sketchps_worker_wire_bytes_total{direction=\"down\",rank=\"1\"}") == 800);
  CHECK(Sample(t, "sketchps_worker_payload_bytes_total{direction=\"up\",rank=\"1\"}") == 360);
  CHECK(Sample(t, "sketchps_worker_dense_bytes_total{rank=\"1\"}") == 8000);
  CHECK(Sample(t, "sketchps_worker_compression_ratio{direction=\"up\",rank=\"1\"}") == Approx(20.0));    // 8000 / 400
  CHECK(Sample(t, "sketchps_worker_compression_ratio{direction=\"down\",rank=\"1\"}") == Approx(10.0));  // 8000 / 800
  CHECK(Sample(t, "sketchps_worker_phase_seconds_total{phase=\"compute\",rank=\"1\"}") == Approx(0.5));
  CHECK(Sample(t, "sketchps_worker_phase_seconds_total{phase=\"exchange\",rank=\"1\"}") == Approx(0.25));
  CHECK(Sample(t, "sketchps_worker_phase_seconds_total{phase=\"evaluate\",rank=\"1\"}") == Approx(2.0));
  CHECK(Sample(t, "sketchps_worker_round_seconds_count{rank=\"1\"}") == 2);
  CHECK(Sample(t, "sketchps_worker_round_seconds_sum{rank=\"1\"}") == Approx(1.0));
  CHECK(Sample(t, "sketchps_worker_loss{rank=\"1\"}") == Approx(1.0));
  CHECK(Sample(t, "sketchps_worker_test_accuracy{rank=\"1\"}") == Approx(0.75));
  CHECK(Sample(t, "sketchps_worker_skipped_rounds_total{rank=\"1\"}") == 1);
}

TEST_CASE("A record without some fields leaves those families unchanged", "[metrics]") {
  WorkerMetrics metrics(0);
  metrics.ObserveRound(nlohmann::json{{"round", 4}, {"bytes_up", "not a number"}});
  const std::string t = metrics.Text();
  CHECK(Sample(t, "sketchps_worker_rounds_total{rank=\"0\"}") == 1);
  CHECK(Sample(t, "sketchps_worker_round{rank=\"0\"}") == 4);
  CHECK(Sample(t, "sketchps_worker_wire_bytes_total{direction=\"up\",rank=\"0\"}") == 0);
  CHECK(Sample(t, "sketchps_worker_compression_ratio{direction=\"up\",rank=\"0\"}") == 0);
}
