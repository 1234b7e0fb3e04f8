#include "ps/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/str_cat.h"

namespace sketchps::ps {
namespace {

prometheus::Histogram::BucketBoundaries SecondsBuckets() {
  return {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30};
}

}  // namespace

ServerMetrics::ServerMetrics(std::uint32_t shard) : registry_(std::make_shared<prometheus::Registry>()) {
  const prometheus::Labels labels{{"shard", std::to_string(shard)}};
  auto& r = *registry_;
  rounds_ = &prometheus::BuildGauge()
                 .Name("sketchps_rounds_applied")
                 .Help("Rounds in the master copy")
                 .Register(r)
                 .Add(labels);
  refused_ = &prometheus::BuildCounter()
                  .Name("sketchps_rounds_refused_total")
                  .Help("Rounds applied without a gradient because their sum or update was not finite")
                  .Register(r)
                  .Add(labels);
  left_out_ = &prometheus::BuildCounter()
                   .Name("sketchps_workers_left_out_total")
                   .Help("Workers left out of a round by its deadline (ps.round_deadline_seconds), per phase closed")
                   .Register(r)
                   .Add(labels);
  bytes_in_ = &prometheus::BuildCounter()
                   .Name("sketchps_bytes_in_total")
                   .Help("Serialized PushPull request bytes")
                   .Register(r)
                   .Add(labels);
  bytes_out_ = &prometheus::BuildCounter()
                    .Name("sketchps_bytes_out_total")
                    .Help("Serialized PushPull response bytes")
                    .Register(r)
                    .Add(labels);
  auto& pushes =
      prometheus::BuildCounter().Name("sketchps_pushes_total").Help("PushPull requests by outcome").Register(r);
  accepted_ = &pushes.Add({{"shard", std::to_string(shard)}, {"outcome", "accepted"}});
  duplicate_ = &pushes.Add({{"shard", std::to_string(shard)}, {"outcome", "duplicate"}});
  rejected_ = &pushes.Add({{"shard", std::to_string(shard)}, {"outcome", "rejected"}});
  phase_wait_ = &prometheus::BuildHistogram()
                     .Name("sketchps_phase_wait_seconds")
                     .Help("Per PushPull: from arrival to the phase result")
                     .Register(r)
                     .Add(labels, SecondsBuckets());
  straggler_wait_ = &prometheus::BuildHistogram()
                         .Name("sketchps_straggler_wait_seconds")
                         .Help("Per phase: from the first contribution to the last")
                         .Register(r)
                         .Add(labels, SecondsBuckets());
  auto& ckpt = prometheus::BuildCounter().Name("sketchps_checkpoints_total").Help("Checkpoints by outcome").Register(r);
  checkpoints_ok_ = &ckpt.Add({{"shard", std::to_string(shard)}, {"outcome", "written"}});
  checkpoints_failed_ = &ckpt.Add({{"shard", std::to_string(shard)}, {"outcome", "failed"}});
  checkpoint_seconds_ = &prometheus::BuildHistogram()
                             .Name("sketchps_checkpoint_seconds")
                             .Help("Time to write one checkpoint, fsync included")
                             .Register(r)
                             .Add(labels, SecondsBuckets());
}

ServerMetrics::~ServerMetrics() = default;

void ServerMetrics::SetRoundsApplied(std::uint64_t rounds) { rounds_->Set(static_cast<double>(rounds)); }

void ServerMetrics::CountRefusedRound() { refused_->Increment(); }
void ServerMetrics::CountLeftOut(std::uint64_t workers) { left_out_->Increment(static_cast<double>(workers)); }

void ServerMetrics::AddBytes(std::uint64_t in, std::uint64_t out) {
  bytes_in_->Increment(static_cast<double>(in));
  bytes_out_->Increment(static_cast<double>(out));
}

void ServerMetrics::CountPush(Push outcome) {
  switch (outcome) {
    case Push::kAccepted: accepted_->Increment(); break;
    case Push::kDuplicate: duplicate_->Increment(); break;
    case Push::kRejected: rejected_->Increment(); break;
  }
}

void ServerMetrics::ObservePhaseWait(double seconds) { phase_wait_->Observe(seconds); }
void ServerMetrics::ObserveStragglerWait(double seconds) { straggler_wait_->Observe(seconds); }

void ServerMetrics::CountCheckpoint(bool ok, double seconds) {
  (ok ? checkpoints_ok_ : checkpoints_failed_)->Increment();
  if (ok) checkpoint_seconds_->Observe(seconds);
}

std::string ServerMetrics::Text() const { return prometheus::TextSerializer().Serialize(registry_->Collect()); }

absl::StatusOr<MetricsEndpoint> ServeMetrics(const std::string& address, const ServerMetrics& metrics) {
  return ServeMetricsAt("--metrics-listen", address, {metrics.registry(), StandardMetrics("server")});
}

}  // namespace sketchps::ps
