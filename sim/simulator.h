// Simulate: data-parallel training of a job with P workers in one process (sketchps simulate,
// sketchps-sim), for the regimes a cluster of this size cannot show: hundreds of workers, label-
// skewed data (sim/partition.h), partial participation (sim/participation.h).
//
// The scheme code is the real one: the job spec is read as `sketchps run` reads it, the P workers
// are the job's Replicas over an InProcessHub with the job's shards (sim/cohort.h). Only the
// gradients are computed differently: since every replica holds the same weights, ONE model computes
// each participant's gradient on its own batch, one after another, on the calling thread, with
// libtorch's intra-op threads set to torch_threads (1, as sketchps-worker runs by default). So
// with the iid partition, every worker taking part, and the job's model and seed, the simulation
// computes bitwise what `sketchps run` computes (tests/sim pins it on per-round weight checksums).
//
// Rounds: the job's (train.rounds, or train.epochs x rounds per epoch of P workers). Each round the
// participants are drawn, each takes its batch from the partition and computes its gradient; the
// cohort runs the round (the others sit out); the replicas must agree bitwise; the model takes the
// new weights. Evaluations every eval_every rounds on the first eval_samples test images and after
// the last round on all of them.
// Errors: configuration (InvalidArgument, naming the flag or key), data (NotFound), a diverged
// replica (FailedPrecondition with Reason::kReplicaDiverged).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "job/job_spec.h"
#include "sim/partition.h"

namespace sketchps::sim {

struct SimOptions {
  JobSpec job;
  PartitionSpec partition;
  double participation = 1.0;                 // fraction of the workers drawn per round, (0, 1]
  std::optional<std::uint64_t> seed;          // of the partition and the draws; default job.train.seed
  std::optional<std::uint64_t> eval_every;    // default job.train.eval_every_rounds (0: only at the end)
  std::optional<std::uint64_t> eval_samples;  // default job.train.eval_samples (0: all)
  int torch_threads = 1;
  std::uint64_t progress_every = 0;  // a line on stderr every this many rounds (0: none)
};

// Called with every round's record (sim/sim_record.h) as soon as it exists.
using RecordSink = std::function<void(const nlohmann::json& record)>;

// Runs the simulation; returns its summary (sim/sim_record.h).
absl::StatusOr<nlohmann::json> Simulate(const SimOptions& options, const RecordSink& sink);

}  // namespace sketchps::sim
