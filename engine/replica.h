// Replica: one worker's side of data-parallel training over a sharded parameter vector: a Scheme
// and a replicated Optimizer per shard range, and the round that runs every shard's phases through
// an Aggregator (the shards in parallel, one thread each) and applies each range's aggregate G_t to
// the worker's weights.
//
//   auto replica = Replica::Create(options);
//   auto round = replica->RunRound(aggregator, info, d_grad, d_weights);   // every round
//
// Every worker's Replica and every shard's master copy apply the same aggregates in the same order,
// so the weights stay bitwise identical (the parameter server checks this every round).
// Not thread-safe; the aggregator must accept concurrent RunPhase calls for different shards.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/layout.h"
#include "engine/aggregator.h"
#include "engine/optimizer.h"
#include "engine/round.h"
#include "engine/scheme.h"

namespace sketchps {

struct ReplicaOptions {
  std::uint32_t worker_id = 0;
  std::uint32_t num_workers = 1;
  ShardMap shards;
  LayerTable layers;        // the whole vector's layers
  SchemeMaker make_scheme;  // BoundScheme::make (it sets the scheme's warm-up rounds)
  double density = 0.01;    // k per shard = max(1, floor(density * range length))
  bool global_momentum = true;
  OptimizerConfig optimizer;
  std::uint64_t seed = 0;
  bool parallel_shards = true;   // false: shards one after another on the calling thread
  bool may_be_left_out = false;  // the job has a round deadline (SchemeContext::may_be_left_out)
};

struct ReplicaRound {
  RoundTraffic traffic;          // raw payload bytes, summed over shards
  std::uint64_t selected = 0;    // entries this worker sent, summed over shards
  bool skipped = false;          // it contributed nothing: a non-finite gradient, or RoundInfo::sits_out
  RoundDiagnostics diagnostics;  // summed over shards (Scheme::diagnostics)
  std::uint32_t left_out = 0;    // shards whose round closed without this worker (a round deadline)
};

class Replica {
 public:
  static absl::StatusOr<std::unique_ptr<Replica>> Create(const ReplicaOptions& options);
  // OK when every shard's payloads can travel (Scheme::wire_status); else the first shard's reason.
  absl::Status WireStatus() const;
  // The shards' schemes' advisories (Scheme::advisory), "shard S: ..." each, repeats left out.
  std::vector<std::string> Advisories() const;

  // One round on every shard; d_grad and d_weights cover the whole vector (device memory).
  absl::StatusOr<ReplicaRound> RunRound(Aggregator& aggregator, const RoundInfo& info, const float* d_grad,
                                        float* d_weights);

  // One shard's part of a round: its scheme's phases through the aggregator, then G_t applied to the
  // shard's range of d_weights. Different shards may run at once on different threads (a worker
  // starts each shard as soon as its gradients exist, worker/gradient_watch.h).
  absl::StatusOr<RoundOutcome> RunShard(std::uint32_t s, Aggregator& aggregator, const RoundInfo& info,
                                        const float* d_grad, float* d_weights);
  // Catching up: round `round` of shard s already closed without this worker (the shard is ahead):
  // fetches its G_t and applies it to the shard's range of d_weights, without the scheme.
  absl::StatusOr<RoundOutcome> FetchShard(std::uint32_t s, Aggregator& aggregator, const RoundInfo& info,
                                          float* d_weights);
  // The round's totals from every shard's outcome, in shard order; the first error names its shard.
  absl::StatusOr<ReplicaRound> Combine(std::vector<absl::StatusOr<RoundOutcome>> outcomes) const;

  std::uint32_t num_shards() const { return static_cast<std::uint32_t>(schemes_.size()); }
  Optimizer& optimizer(std::uint32_t shard) { return *optimizers_[shard]; }
  Scheme& scheme(std::uint32_t shard) { return *schemes_[shard]; }

 private:
  explicit Replica(ReplicaOptions options) : options_(std::move(options)) {}

  ReplicaOptions options_;
  std::vector<std::unique_ptr<Scheme>> schemes_;
  std::vector<std::unique_ptr<Optimizer>> optimizers_;
};

}  // namespace sketchps
