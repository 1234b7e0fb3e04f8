// Cohort: the P simulated workers of sim/ — one Replica each (engine/replica.h: the job's scheme and
// replicated optimizer per shard, exactly as sketchps-worker builds them) over one InProcessHub
// (engine/in_process.h: the shards' phase tables, reductions and master copies, as sketchps-server
// runs them), and one round at a time with one thread per worker.
//
//   auto cohort = Cohort::Create(job, initial_weights, /*grad_slots=*/m);
//   write participant i's gradient to cohort->grad_slot(i) (device memory, d floats);
//   auto round = cohort->Run(info, participants);   // sorted worker ids; the rest sit out
//
// The gradients are computed by the caller (sim/simulator.h: one model, since every replica holds the
// same weights); a worker that does not take part runs the round with RoundInfo::sits_out (it pushes
// nothing, keeps its scheme state, and applies G_t like every other replica). After every round
// Run checks that every replica and the shards' master copies hold the same weights, bitwise
// (kernels::Checksum; FailedPrecondition "replica diverged" otherwise).
// Not thread-safe: one caller; Run starts and joins its own threads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/in_process.h"
#include "engine/replica.h"
#include "job/job_spec.h"
#include "kernels/backend.h"
#include "sim/wire_meter.h"

namespace sketchps::sim {

// What a round did, for the records (sim/sim_record.h).
struct CohortRound {
  std::vector<ReplicaRound> rounds;                   // per participant, in the order given to Run
  std::vector<std::uint64_t> bytes_up;                // per participant: its payloads' wire bytes, all shards
  std::vector<std::uint64_t> shard_in;                // per shard: the participants' pushes
  std::vector<std::uint64_t> shard_out;               // per shard: every phase result to each participant, and
                                                      // G_t to each worker that sat out (to keep it in step)
  std::vector<std::uint64_t> shard_out_participants;  // per shard: the phase results to the participants
  std::uint64_t checksum = 0;                         // of the weights every replica holds after the round
};

class Cohort {
 public:
  // The job's P workers and S shards from `initial` (the whole vector). InvalidArgument when a
  // replica cannot be built or its payloads could not travel (Replica::WireStatus, as a worker).
  static absl::StatusOr<std::unique_ptr<Cohort>> Create(const JobSpec& job, const std::vector<float>& initial,
                                                        std::uint32_t grad_slots);
  ~Cohort();

  float* grad_slot(std::uint32_t i) { return slots_.at(i).data(); }
  // Worker w's weights (device memory, dim() floats).
  const float* weights(std::uint32_t w) const;
  std::uint64_t dim() const { return dim_; }
  std::vector<std::string> Advisories() const;

  // One round: participants[i] pushes the gradient in grad_slot(i) (at most grad_slots of them).
  absl::StatusOr<CohortRound> Run(const RoundInfo& info, const std::vector<std::uint32_t>& participants);

 private:
  struct Member;
  Cohort(const JobSpec& job, const ShardMap& map, const std::vector<float>& initial);
  absl::Status RunMember(std::uint32_t w, RoundInfo info, const float* grad, ReplicaRound& out);
  absl::StatusOr<std::uint64_t> CheckReplicas();
  absl::StatusOr<CohortRound> Collect(const std::vector<std::uint32_t>& participants, const std::vector<int>& slot,
                                      std::vector<ReplicaRound> rounds);

  const std::uint64_t dim_;
  const ShardMap map_;
  InProcessHub hub_;
  ResultSizes sizes_;
  std::vector<std::unique_ptr<Member>> members_;
  std::vector<kernels::DeviceArray<float>> slots_;
};

}  // namespace sketchps::sim
