#include "engine/shard.h"

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/status.h"
#include "kernels/vector_ops.h"

namespace sketchps {

double EpochOfRound(std::uint64_t round, double rounds_per_epoch) {
  return rounds_per_epoch > 0 ? static_cast<double>(round) / rounds_per_epoch : 0.0;
}

Shard::Shard(ShardOptions options)
    : options_(std::move(options)),
      dim_(options_.initial_weights.size()),
      reducer_(dim_),
      master_(options_.initial_weights),
      optimizer_(options_.optimizer, dim_, options_.global_momentum, options_.layers) {
  if (options_.own_strand) strand_ = std::make_unique<Strand>("shard");
  PhaseTableOptions t;
  t.num_workers = options_.num_workers;
  t.deadline = options_.round_deadline;
  t.elastic = options_.elastic;
  t.reduce = [this](const PhaseSpec& spec, const std::vector<const Contribution*>& in, const PhaseResult* previous) {
    return reducer_.Reduce(spec, in, previous);
  };
  t.on_final = [this](const PhaseKey& key, PhaseResult result) { return ApplyFinal(key, std::move(result)); };
  t.admit = [this](const PhaseSpec& spec, const PayloadValue& payload, const PhaseResult* previous,
                   const PayloadValue* first) { return reducer_.Admit(spec, payload, previous, first); };
  t.strand = strand_.get();
  t.first_round = options_.rounds_applied;
  table_ = std::make_unique<PhaseTable>(std::move(t));
  if (!options_.roster.empty()) table_->SetRoster(options_.roster).IgnoreError();  // size checked by callers
  {
    absl::MutexLock lock(&master_mu_);
    rounds_applied_ = options_.rounds_applied;
    checksum_ = WeightsChecksum(options_.initial_weights);
    if (!options_.optimizer_state.empty())
      optimizer_.SetState(options_.optimizer_state).IgnoreError();  // sizes checked by callers
    if (options_.last) last_ = *options_.last;
    reduction_state_ = options_.reduction_state;
  }
  reducer_.SetState(options_.reduction_state).IgnoreError();  // sizes checked by callers
  if (options_.last) table_->Seed(options_.last->key, options_.last->result);
}

Shard::~Shard() { strand_.reset(); }

absl::StatusOr<bool> Shard::TryApply(const PhaseKey& key, const PhaseResult& result) {
  SKETCHPS_ASSIGN_OR_RETURN(Aggregate g, MeanAggregate(result, dim_));
  if (backup_.size() != dim_) backup_ = kernels::DeviceArray<float>(dim_);
  SKETCHPS_RETURN_IF_ERROR(kernels::Copy(master_.data(), backup_.data(), dim_, exec_));
  std::vector<float> optimizer_state = optimizer_.State();
  SKETCHPS_RETURN_IF_ERROR(
      optimizer_.Apply(g, master_.data(), StepClock{key.round, EpochOfRound(key.round, options_.rounds_per_epoch)}));
  SKETCHPS_ASSIGN_OR_RETURN(bool finite, kernels::AllFinite(master_.data(), dim_, exec_));
  if (finite) {
    const std::vector<float> v = optimizer_.State();
    for (float x : v) finite &= std::isfinite(x);
  }
  if (finite) return true;
  SKETCHPS_RETURN_IF_ERROR(kernels::Copy(backup_.data(), master_.data(), dim_, exec_));
  SKETCHPS_RETURN_IF_ERROR(optimizer_.SetState(optimizer_state));
  return false;
}

absl::StatusOr<std::shared_ptr<const PhaseResult>> Shard::ApplyFinal(const PhaseKey& key, PhaseResult result) {
  AppliedRound applied;
  {
    absl::MutexLock lock(&master_mu_);
    if (key.round != rounds_applied_) {
      return absl::FailedPreconditionError(
          absl::StrCat("round ", key.round, " cannot be applied after ", rounds_applied_, " rounds"));
    }
    SKETCHPS_ASSIGN_OR_RETURN(bool ok, TryApply(key, result));
    if (!ok) {
      // The update would make the master copy non-finite: apply no gradient instead (every replica does
      // the same with the refused result it receives), and forget what the round did to the reducer's state.
      SKETCHPS_RETURN_IF_ERROR(reducer_.SetState(reduction_state_));
      result = RefusedResult(Reduction::kSparseSum, dim_);
      SKETCHPS_ASSIGN_OR_RETURN(ok, TryApply(key, result));
      if (!ok) {
        return absl::DataLossError(
            absl::StrCat("round ", key.round, ": the master copy would become non-finite even ",
                         "without this round's gradient (the momentum diverged); nothing was applied"));
      }
    }
    ++rounds_applied_;
    SKETCHPS_ASSIGN_OR_RETURN(checksum_, kernels::Checksum(master_.data(), dim_, exec_));
    reduction_state_ = reducer_.State();
    last_ = FinalResult{key, std::make_shared<const PhaseResult>(std::move(result))};
    applied = AppliedRound{rounds_applied_, checksum_, last_, last_.result->refused};
  }
  if (options_.on_applied) options_.on_applied(applied);
  return applied.last.result;
}

std::vector<float> Shard::OptimizerState() const {
  absl::MutexLock lock(&master_mu_);
  return optimizer_.State();
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

ShardSnapshot Shard::Snapshot() const {
  absl::MutexLock lock(&master_mu_);
  return ShardSnapshot{rounds_applied_, master_.ToHost(), optimizer_.State(), reduction_state_, checksum_, last_};
}

ReductionState Shard::reduction_state() const {
  absl::MutexLock lock(&master_mu_);
  return reduction_state_;
}

void Shard::Drain() {
  if (strand_) strand_->Drain();
}

}  // namespace sketchps
