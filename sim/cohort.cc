#include "sim/cohort.h"

#include <thread>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/reason.h"
#include "common/status.h"
#include "kernels/vector_ops.h"

namespace sketchps::sim {

// One worker: its replica, its aggregator (metered), its weights and this round's figures.
struct Cohort::Member {
  std::unique_ptr<Replica> replica;
  std::unique_ptr<Aggregator> inner;
  std::unique_ptr<MeteredAggregator> aggregator;
  kernels::DeviceArray<float> weights;
  WorkerBytes bytes;
  kernels::Scratch scratch;
  std::uint64_t checksum = 0;
};

Cohort::Cohort(const JobSpec& job, const ShardMap& map, const std::vector<float>& initial)
    : dim_(initial.size()),
      map_(map),
      hub_(job.workers, map, initial, job.optimizer, job.scheme.global_momentum, job.rounds_per_epoch(), job.layout) {}

Cohort::~Cohort() = default;

absl::StatusOr<std::unique_ptr<Cohort>> Cohort::Create(const JobSpec& job, const std::vector<float>& initial,
                                                       std::uint32_t grad_slots) {
  if (initial.size() != job.layout.dim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: ", initial.size(), " weights for a layout of ", job.layout.dim()));
  }
  SKETCHPS_ASSIGN_OR_RETURN(const ShardMap map, MakeShardMap(job.layout, job.servers));
  std::unique_ptr<Cohort> c(new Cohort(job, map, initial));
  for (std::uint32_t w = 0; w < job.workers; ++w) {
    auto m = std::make_unique<Member>();
    SKETCHPS_ASSIGN_OR_RETURN(
        m->replica, Replica::Create(ReplicaOptions{w, job.workers, map, job.layout, job.scheme.make, job.scheme.density,
                                                   job.scheme.global_momentum, job.optimizer, job.train.seed,
                                                   /*parallel_shards=*/false}));
    SKETCHPS_RETURN_IF_ERROR(m->replica->WireStatus());
    // Rounds may take long with hundreds of workers on two cores: the timeout only ends a stuck run.
    m->inner = c->hub_.MakeAggregator(w, absl::Minutes(10));
    m->aggregator = std::make_unique<MeteredAggregator>(*m->inner, c->sizes_, m->bytes);
    m->weights = kernels::DeviceArray<float>(initial);
    c->members_.push_back(std::move(m));
  }
  for (std::uint32_t i = 0; i < grad_slots; ++i) c->slots_.emplace_back(initial.size());
  return c;
}

const float* Cohort::weights(std::uint32_t w) const { return members_.at(w)->weights.data(); }

std::vector<std::string> Cohort::Advisories() const { return members_.front()->replica->Advisories(); }

absl::Status Cohort::RunMember(std::uint32_t w, RoundInfo info, const float* grad, ReplicaRound& out) {
#if defined(_OPENMP)
  omp_set_num_threads(1);  // per-thread setting: the workers' threads already are the parallelism
#endif
  Member& m = *members_[w];
  m.bytes.Reset(static_cast<std::uint32_t>(map_.ranges.size()));
  std::vector<absl::StatusOr<RoundOutcome>> outcomes;
  for (std::uint32_t s = 0; s < map_.ranges.size(); ++s) {
    outcomes.push_back(m.replica->RunShard(s, *m.aggregator, info, grad, m.weights.data()));
  }
  SKETCHPS_ASSIGN_OR_RETURN(out, m.replica->Combine(std::move(outcomes)));
  const kernels::Exec exec{nullptr, &m.scratch};
  SKETCHPS_ASSIGN_OR_RETURN(m.checksum, kernels::Checksum(m.weights.data(), dim_, exec));
  return absl::OkStatus();
}

absl::StatusOr<std::uint64_t> Cohort::CheckReplicas() {
  const std::uint64_t first = members_.front()->checksum;
  for (std::uint32_t w = 1; w < members_.size(); ++w) {
    if (members_[w]->checksum != first) {
      return WithReason(absl::FailedPreconditionError(
                            absl::StrCat("replica diverged: worker ", w, "'s weights differ from worker 0's")),
                        Reason::kReplicaDiverged);
    }
  }
  // The hub's master copy is a host vector: the host loop gives kernels::Checksum's value bit for bit.
  const std::uint64_t shards = WeightsChecksum(hub_.MasterWeights());
  if (shards != first) {
    return WithReason(
        absl::FailedPreconditionError("replica diverged: the shards' master copy differs from the workers'"),
        Reason::kReplicaDiverged);
  }
  return first;
}

absl::StatusOr<CohortRound> Cohort::Run(const RoundInfo& info, const std::vector<std::uint32_t>& participants) {
  if (participants.size() > slots_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(participants.size(), " participants for ", slots_.size(), " slots"));
  }
  const std::uint32_t p = static_cast<std::uint32_t>(members_.size());
  std::vector<int> slot(p, -1);
  for (std::size_t i = 0; i < participants.size(); ++i) slot.at(participants[i]) = static_cast<int>(i);
  std::vector<ReplicaRound> rounds(p);
  std::vector<absl::Status> status(p);
  sizes_.Clear();
  {
    std::vector<std::thread> threads;
    for (std::uint32_t w = 0; w < p; ++w) {
      RoundInfo mine = info;
      mine.sits_out = slot[w] < 0;
      const float* grad = slots_[std::max(slot[w], 0)].data();  // not read when sitting out
      threads.emplace_back(
          [this, w, mine, grad, &rounds, &status] { status[w] = RunMember(w, mine, grad, rounds[w]); });
    }
    for (auto& t : threads) t.join();
  }
  for (std::uint32_t w = 0; w < p; ++w) {
    if (!status[w].ok()) return Annotate(status[w], absl::StrCat("worker ", w));
  }
  return Collect(participants, slot, std::move(rounds));
}

absl::StatusOr<CohortRound> Cohort::Collect(const std::vector<std::uint32_t>& participants,
                                            const std::vector<int>& slot, std::vector<ReplicaRound> rounds) {
  CohortRound out;
  SKETCHPS_ASSIGN_OR_RETURN(out.checksum, CheckReplicas());
  const std::size_t shards = map_.ranges.size();
  out.shard_in.assign(shards, 0);
  out.shard_out_participants.assign(shards, 0);
  for (std::uint32_t w : participants) {
    const WorkerBytes& b = members_[w]->bytes;
    std::uint64_t up = 0;
    for (std::size_t s = 0; s < shards; ++s) {
      out.shard_in[s] += b.up[s];
      out.shard_out_participants[s] += b.down[s];
      up += b.up[s];
    }
    out.bytes_up.push_back(up);
    out.rounds.push_back(std::move(rounds[w]));
  }
  out.shard_out = out.shard_out_participants;
  for (std::uint32_t w = 0; w < members_.size(); ++w) {
    if (slot[w] >= 0) continue;
    for (std::size_t s = 0; s < shards; ++s) out.shard_out[s] += members_[w]->bytes.final[s];
  }
  return out;
}

}  // namespace sketchps::sim
