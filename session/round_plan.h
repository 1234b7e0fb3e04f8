// RoundPlan: which samples, and which fractional epoch, each round of one worker uses, also after
// the decentralized mode regrouped to fewer workers (peer/regroup.h). No libtorch.
//
// A plan is one segment: from round `first_round` on there are `workers` workers and this one is
// `rank`. The segment starts at position `offset` of the permutation of data epoch `data_epoch` and
// at fractional epoch `epoch0`. For round r of the segment, k = r - first_round, B = workers * batch:
//   - the first data epoch has S0 = floor((N - offset) / B) steps left, later ones S = floor(N / B);
//   - k < S0: data epoch data_epoch at position offset + k*B; else data epoch
//     data_epoch + 1 + (k - S0) / S at position ((k - S0) mod S) * B;
//   - this worker's samples are pi_e[position + rank*b + j], j in [0, b): the data order rule of
//     fashion_mnist.h, which Initial() reproduces exactly (so P workers still equal one process with
//     batch P*b);
//   - fractional epoch (learning-rate schedule, schemes): epoch0 + k / max(1, S), which for the
//     first segment is the job's EpochOfRound(r, rounds_per_epoch()) that the servers use too.
// Continue() starts a segment at round `at` where the current one stands: no sample of the current
// data epoch is used twice, and the fractional epoch goes on from where it was.
// With local steps (train.local_steps H > 1) a round takes H batches: B above is workers * batch * H,
// and inner step h of the round uses pi_e[position + h*workers*b + rank*b + j] (the data order of the
// job without local steps at its step r*H + h) at fractional epoch EpochOf(r) + h / (H * S).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "job/job_spec.h"

namespace sketchps::session {

struct DataPosition {
  std::uint64_t epoch = 0;     // data epoch (which permutation)
  std::uint64_t position = 0;  // index of this round's first sample (rank 0's) in the permutation
};

struct RoundPlan {
  std::uint64_t first_round = 0;
  std::uint32_t workers = 1;
  std::uint32_t rank = 0;
  std::uint64_t data_epoch = 0;
  std::uint64_t offset = 0;
  double epoch0 = 0;
  std::uint64_t samples = 0;      // N (data.train_samples)
  std::uint64_t batch = 1;        // b (data.batch_size)
  std::uint64_t local_steps = 1;  // H (train.local_steps): batches per round
  std::uint64_t last_round = 0;   // one past the job's last round under this plan

  // The job's own plan. InvalidArgument when N < workers * batch.
  static absl::StatusOr<RoundPlan> Initial(const JobSpec& job, std::uint32_t rank);
  // The plan from round `at` (>= first_round) on with `workers` workers. Jobs with train.rounds keep
  // their last round; jobs by epochs end when the fractional epoch reaches train.epochs.
  absl::StatusOr<RoundPlan> Continue(const JobSpec& job, std::uint64_t at, std::uint32_t workers,
                                     std::uint32_t rank) const;

  // Steps in a whole data epoch (S, at least 1).
  std::uint64_t steps_per_epoch() const;
  DataPosition At(std::uint64_t round) const;
  double EpochOf(std::uint64_t round) const;
  // The fractional epoch of inner step `step` (< local_steps) of a round (the inner optimizer's schedule).
  double EpochOf(std::uint64_t round, std::uint64_t step) const;
};

}  // namespace sketchps::session
