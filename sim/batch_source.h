// BatchSource: which training samples each simulated worker uses in each round (sim/). Torch-free.
//
//   iid                the job's data order exactly (worker/fashion_mnist.h's rule through
//                      session/round_plan.h): worker w of round r takes pi_e[position + w b + j], as
//                      sketchps-worker rank w does, so a simulation of P workers with every worker
//                      taking part trains on the batches `sketchps run` trains on. A worker sitting a
//                      round out leaves its samples of that round unused.
//   a static partition each worker cycles through its own samples (sim/partition.h): a seeded shuffle
//                      of them per local epoch (EpochPermutation(n_w, seed + w, local epoch)), b at a
//                      time, a batch running on into the next local epoch when one ends (a worker
//                      holding fewer than b samples repeats some in a batch). Its position moves only
//                      in rounds it takes part in.
// Not thread-safe: the simulator asks for batches on one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "job/job_spec.h"
#include "session/round_plan.h"
#include "sim/partition.h"
#include "worker/fashion_mnist.h"

namespace sketchps::sim {

class BatchSource {
 public:
  // `labels`: the training set's (its first job.data.train_samples are used); `seed`: the partition's
  // and the local orders' (iid follows the job's train.seed). InvalidArgument from
  // the round plan (data.train_samples < workers x batch_size) or the partition.
  static absl::StatusOr<std::unique_ptr<BatchSource>> Create(const JobSpec& job, const PartitionSpec& spec,
                                                             std::span<const std::uint8_t> labels, std::uint64_t seed);

  // Worker w's batch of round `round` (job.data.batch_size indices): call it only for the round's
  // participants, rounds in increasing order. The view is valid until the next call.
  absl::StatusOr<std::span<const std::uint64_t>> Next(std::uint32_t w, std::uint64_t round);

  // The samples worker w holds (static partitions; empty for iid).
  std::span<const std::uint64_t> Held(std::uint32_t w) const;

 private:
  struct Local {
    std::uint64_t consumed = 0;        // samples taken so far
    std::uint64_t epoch = ~0ull;       // local epoch whose permutation `order` holds
    std::vector<std::uint64_t> order;  // that permutation of the worker's samples
  };
  BatchSource(const JobSpec& job, std::uint64_t seed)
      : batch_(job.data.batch_size), seed_(seed), order_(job.train.seed) {}
  std::uint64_t LocalSample(std::uint32_t w, std::uint64_t position);

  const std::uint64_t batch_;
  const std::uint64_t seed_;
  bool iid_ = true;
  std::vector<session::RoundPlan> plans_;  // iid: rank w's plan of the job
  worker::BatchOrder order_;               // iid: the job's permutations
  Partition partition_;                    // static partitions
  std::vector<Local> local_;
  std::vector<std::uint64_t> out_;
};

}  // namespace sketchps::sim
