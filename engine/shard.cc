#include "engine/shard.h"

#include "common/checksum.h"
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
  {
    absl::MutexLock lock(&master_mu_);
    rounds_applied_ = options_.rounds_applied;
    checksum_ = WeightsChecksum(options_.initial_weights);
    if (!options_.velocity.empty()) optimizer_.SetVelocity(options_.velocity).IgnoreError();  // sizes checked by callers
  }
  // Lock order: the table's lock, then master_mu_ (ApplyFinal runs under the table's lock).
  if (options_.last) table_->Seed(options_.last->key, options_.last->result);
}

absl::Status Shard::ApplyFinal(const PhaseKey& key, const PhaseResult& result) {
  SKETCHPS_ASSIGN_OR_RETURN(Aggregate g, MeanAggregate(result, dim_));
  absl::MutexLock lock(&master_mu_);
  SKETCHPS_RETURN_IF_ERROR(optimizer_.Apply(g, master_.data(), EpochOfRound(key.round, options_.rounds_per_epoch)));
  ++rounds_applied_;
  std::vector<float> weights = master_.ToHost();
  checksum_ = WeightsChecksum(weights);
  if (options_.on_applied) {
    options_.on_applied(ShardSnapshot{rounds_applied_, std::move(weights), optimizer_.Velocity(), checksum_,
                                      FinalResult{key, std::make_shared<const PhaseResult>(result)}});
  }
  return absl::OkStatus();
}

std::vector<float> Shard::Velocity() const {
  absl::MutexLock lock(&master_mu_);
  return optimizer_.Velocity();
}

std::uint64_t Shard::checksum() const {
  absl::MutexLock lock(&master_mu_);
  return checksum_;
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
