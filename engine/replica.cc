#include "engine/replica.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/shard_threads.h"

namespace sketchps {

absl::StatusOr<std::unique_ptr<Replica>> Replica::Create(const ReplicaOptions& options) {
  if (options.worker_id >= options.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker ", options.worker_id, " is not in [0, ", options.num_workers, ")"));
  }
  if (!options.make_scheme) return absl::InvalidArgumentError("Replica: no scheme maker");
  std::unique_ptr<Replica> replica(new Replica(options));
  for (std::uint32_t s = 0; s < options.shards.ranges.size(); ++s) {
    const auto& r = options.shards.ranges[s];
    const auto k =
        std::max<std::uint64_t>(1, static_cast<std::uint64_t>(options.density * static_cast<double>(r.size())));
    SchemeContext ctx;
    ctx.worker_id = options.worker_id;
    ctx.num_workers = options.num_workers;
    ctx.shard_id = s;
    ctx.dim = r.size();
    ctx.layers = ClipLayers(options.layers, r.lo, r.hi);
    ctx.k = k;
    ctx.seed = options.seed;
    ctx.may_be_left_out = options.may_be_left_out;
    replica->schemes_.push_back(options.make_scheme(std::move(ctx)));
    replica->optimizers_.push_back(std::make_unique<Optimizer>(options.optimizer, r.size(), options.global_momentum,
                                                               ClipLayers(options.layers, r.lo, r.hi)));
  }
  return replica;
}

absl::Status Replica::WireStatus() const {
  for (std::size_t s = 0; s < schemes_.size(); ++s) {
    if (const absl::Status st = schemes_[s]->wire_status(); !st.ok()) {
      return Annotate(st, absl::StrCat("shard ", s));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> Replica::Advisories() const {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (std::size_t s = 0; s < schemes_.size(); ++s) {
    const std::string a = schemes_[s]->advisory();
    if (!a.empty() && seen.insert(a).second) out.push_back(absl::StrCat("shard ", s, ": ", a));
  }
  return out;
}

absl::StatusOr<RoundOutcome> Replica::RunShard(std::uint32_t s, Aggregator& aggregator, const RoundInfo& info,
                                               const float* d_grad, float* d_weights) {
  const auto lo = options_.shards.ranges[s].lo;
  SKETCHPS_ASSIGN_OR_RETURN(RoundOutcome out, sketchps::RunRound(*schemes_[s], aggregator, s, info, d_grad + lo));
  SKETCHPS_RETURN_IF_ERROR(optimizers_[s]->Apply(out.aggregate, d_weights + lo, StepClock{info.round, info.epoch}));
  return out;
}

absl::StatusOr<RoundOutcome> Replica::FetchShard(std::uint32_t s, Aggregator& aggregator, const RoundInfo& info,
                                                 float* d_weights) {
  const auto& r = options_.shards.ranges[s];
  SKETCHPS_ASSIGN_OR_RETURN(RoundOutcome out, FetchRound(*schemes_[s], aggregator, s, info.round, r.size()));
  SKETCHPS_RETURN_IF_ERROR(optimizers_[s]->Apply(out.aggregate, d_weights + r.lo, StepClock{info.round, info.epoch}));
  return out;
}

absl::StatusOr<ReplicaRound> Replica::RunRound(Aggregator& aggregator, const RoundInfo& info, const float* d_grad,
                                               float* d_weights) {
  auto run = [&](std::uint32_t s) { return RunShard(s, aggregator, info, d_grad, d_weights); };
  if (!options_.parallel_shards) {
    std::vector<absl::StatusOr<RoundOutcome>> outcomes;
    for (std::uint32_t s = 0; s < num_shards(); ++s) outcomes.push_back(run(s));
    return Combine(std::move(outcomes));
  }
  ShardThreads<absl::StatusOr<RoundOutcome>> threads(num_shards(), run, absl::CancelledError("shard not run"));
  return Combine(threads.Wait());
}

absl::StatusOr<ReplicaRound> Replica::Combine(std::vector<absl::StatusOr<RoundOutcome>> outcomes) const {
  ReplicaRound round;
  for (std::uint32_t s = 0; s < num_shards(); ++s) {
    if (!outcomes[s].ok()) {
      return Annotate(outcomes[s].status(), absl::StrCat("shard ", s));
    }
    round.traffic.bytes_up += outcomes[s]->traffic.bytes_up;
    round.traffic.bytes_down += outcomes[s]->traffic.bytes_down;
    if (outcomes[s]->left_out) {  // the scheme's figures are not this round's, but for the floor's verdicts
      ++round.left_out;
      round.diagnostics.AddFloor(schemes_[s]->diagnostics());
      continue;
    }
    round.selected += schemes_[s]->selected();
    round.skipped |= schemes_[s]->skipped();
    round.diagnostics += schemes_[s]->diagnostics();
  }
  return round;
}

}  // namespace sketchps
