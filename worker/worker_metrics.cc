#include "worker/worker_metrics.h"

#include <iterator>
#include <optional>

#include <nlohmann/json.hpp>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "worker/recovery_figures.h"

namespace sketchps::worker {
namespace {

constexpr const char* kPhases[][2] = {{"compute", "compute_s"},
                                      {"exchange", "exchange_s"},
                                      {"compress", "compress_s"},
                                      {"communicate", "communicate_s"},
                                      {"evaluate", "eval_s"}};

std::optional<double> Number(const nlohmann::json& record, const char* key) {
  const auto it = record.find(key);
  if (it == record.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

void Add(prometheus::Counter* counter, const nlohmann::json& record, const char* key) {
  if (auto v = Number(record, key); v && *v >= 0) counter->Increment(*v);
}

}  // namespace

struct WorkerMetrics::Families {
  prometheus::Counter* rounds;
  prometheus::Gauge* round;
  prometheus::Gauge* workers;
  prometheus::Counter* wire_up;
  prometheus::Counter* wire_down;
  prometheus::Counter* payload_up;
  prometheus::Counter* payload_down;
  prometheus::Counter* dense;
  prometheus::Gauge* ratio_up;
  prometheus::Gauge* ratio_down;
  prometheus::Counter* phases[std::size(kPhases)];
  prometheus::Gauge* recovery[std::size(kRecoveryFigures)];
  prometheus::Histogram* round_seconds;
  prometheus::Gauge* loss;
  prometheus::Gauge* accuracy;
  prometheus::Counter* skipped;
};

WorkerMetrics::WorkerMetrics(std::uint32_t rank)
    : registry_(std::make_shared<prometheus::Registry>()), f_(std::make_unique<Families>()) {
  using namespace prometheus;
  const std::string r = std::to_string(rank);
  auto& reg = *registry_;
  f_->rounds =
      &BuildCounter().Name("sketchps_worker_rounds_total").Help("Rounds completed").Register(reg).Add({{"rank", r}});
  f_->round = &BuildGauge()
                   .Name("sketchps_worker_round")
                   .Help("The last completed round (0-based)")
                   .Register(reg)
                   .Add({{"rank", r}});
  f_->workers =
      &BuildGauge().Name("sketchps_worker_workers").Help("Workers in the last round").Register(reg).Add({{"rank", r}});
  auto& wire = BuildCounter()
                   .Name("sketchps_worker_wire_bytes_total")
                   .Help("Serialized message bytes by direction")
                   .Register(reg);
  f_->wire_up = &wire.Add({{"rank", r}, {"direction", "up"}});
  f_->wire_down = &wire.Add({{"rank", r}, {"direction", "down"}});
  auto& payload =
      BuildCounter().Name("sketchps_worker_payload_bytes_total").Help("Payload array bytes by direction").Register(reg);
  f_->payload_up = &payload.Add({{"rank", r}, {"direction", "up"}});
  f_->payload_down = &payload.Add({{"rank", r}, {"direction", "down"}});
  f_->dense = &BuildCounter()
                   .Name("sketchps_worker_dense_bytes_total")
                   .Help("Bytes dense SGD would send each way")
                   .Register(reg)
                   .Add({{"rank", r}});
  auto& ratio = BuildGauge()
                    .Name("sketchps_worker_compression_ratio")
                    .Help("Dense bytes over wire bytes, cumulative")
                    .Register(reg);
  f_->ratio_up = &ratio.Add({{"rank", r}, {"direction", "up"}});
  f_->ratio_down = &ratio.Add({{"rank", r}, {"direction", "down"}});
  auto& phases = BuildCounter()
                     .Name("sketchps_worker_phase_seconds_total")
                     .Help("Seconds spent per phase of a round")
                     .Register(reg);
  for (std::size_t i = 0; i < std::size(kPhases); ++i)
    f_->phases[i] = &phases.Add({{"rank", r}, {"phase", kPhases[i][0]}});
  auto& recovery = BuildGauge()
                       .Name("sketchps_worker_recovery")
                       .Help("The last compressed round's recovery figure (docs/methods.md Recovery diagnostics)")
                       .Register(reg);
  for (std::size_t i = 0; i < std::size(kRecoveryFigures); ++i)
    f_->recovery[i] = &recovery.Add({{"rank", r}, {"figure", kRecoveryFigures[i]}});
  f_->round_seconds =
      &BuildHistogram()
           .Name("sketchps_worker_round_seconds")
           .Help("Per round: compute start to exchange end")
           .Register(reg)
           .Add({{"rank", r}}, Histogram::BucketBoundaries{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30});
  f_->loss = &BuildGauge()
                  .Name("sketchps_worker_loss")
                  .Help("Training loss of the last round")
                  .Register(reg)
                  .Add({{"rank", r}});
  f_->accuracy = &BuildGauge()
                      .Name("sketchps_worker_test_accuracy")
                      .Help("The last evaluation's test accuracy")
                      .Register(reg)
                      .Add({{"rank", r}});
  f_->skipped = &BuildCounter()
                     .Name("sketchps_worker_skipped_rounds_total")
                     .Help("Rounds whose gradient was not finite")
                     .Register(reg)
                     .Add({{"rank", r}});
}

WorkerMetrics::~WorkerMetrics() = default;

void WorkerMetrics::ObserveRound(const nlohmann::json& record) {
  f_->rounds->Increment();
  if (auto v = Number(record, "round")) f_->round->Set(*v);
  if (auto v = Number(record, "workers")) f_->workers->Set(*v);
  if (auto v = Number(record, "loss")) f_->loss->Set(*v);
  if (auto v = Number(record, "test_accuracy")) f_->accuracy->Set(*v);
  if (const auto it = record.find("skipped"); it != record.end() && it->is_boolean() && it->get<bool>()) {
    f_->skipped->Increment();
  }
  Add(f_->wire_up, record, "bytes_up");
  Add(f_->wire_down, record, "bytes_down");
  Add(f_->payload_up, record, "payload_up");
  Add(f_->payload_down, record, "payload_down");
  Add(f_->dense, record, "dense_bytes");
  for (std::size_t i = 0; i < std::size(kPhases); ++i) Add(f_->phases[i], record, kPhases[i][1]);
  for (std::size_t i = 0; i < std::size(kRecoveryFigures); ++i) {
    if (auto v = Number(record, kRecoveryFigures[i])) f_->recovery[i]->Set(*v);
  }
  const auto start = Number(record, "round_start"), end = Number(record, "time");
  if (start && end && *end >= *start) f_->round_seconds->Observe(*end - *start);
  const double dense = f_->dense->Value();
  if (f_->wire_up->Value() > 0) f_->ratio_up->Set(dense / f_->wire_up->Value());
  if (f_->wire_down->Value() > 0) f_->ratio_down->Set(dense / f_->wire_down->Value());
}

std::string WorkerMetrics::Text() const { return prometheus::TextSerializer().Serialize(registry_->Collect()); }

absl::StatusOr<MetricsEndpoint> ServeWorkerMetrics(const std::string& address, const WorkerMetrics& metrics) {
  return ServeMetricsAt("--metrics-listen", address, {metrics.registry(), StandardMetrics("worker")});
}

}  // namespace sketchps::worker
