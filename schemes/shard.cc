#include "schemes/shard.h"

#include "common/status.h"

namespace sketchps {

double EpochOfRound(std::uint64_t round, double rounds_per_epoch) {
  return rounds_per_epoch > 0 ? static_cast<double>(round) / rounds_per_epoch : 0.0;
}

Shard::Shard(ShardOptions options)
    : options_(std::move(options)),
      dim_(options_.initial_weights.size()),
      reducer_(std::make_shared<Reducer>(dim_)),
      master_(options_.initial_weights),
      optimizer_(options_.optimizer, dim_, options_.global_momentum) {
  auto reducer = reducer_;
  table_ = std::make_unique<PhaseTable>(
      options_.num_workers,
      [reducer](const PhaseSpec& spec, const std::vector<const Contribution*>& in, const PhaseResult* previous) {
        return reducer->Reduce(spec, in, previous);
      },
      [this](const PhaseKey& key, const PhaseResult& result) { return ApplyFinal(key, result); });
}

absl::Status Shard::ApplyFinal(const PhaseKey& key, const PhaseResult& result) {
  SKETCHPS_ASSIGN_OR_RETURN(Aggregate g, MeanAggregate(result, dim_));
  absl::MutexLock lock(&master_mu_);
  SKETCHPS_RETURN_IF_ERROR(optimizer_.Apply(g, master_.data(), EpochOfRound(key.round, options_.rounds_per_epoch)));
  ++rounds_applied_;
  return absl::OkStatus();
}

std::vector<float> Shard::Weights() const {
  absl::MutexLock lock(&master_mu_);
  return master_.ToHost();
}

std::uint64_t Shard::rounds_applied() const {
  absl::MutexLock lock(&master_mu_);
  return rounds_applied_;
}

}  // namespace sketchps
