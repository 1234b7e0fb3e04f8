// LocalSteps: one worker's side of train.local_steps (job/job_spec.h, docs/methods.md "Local steps").
// A round starts at the replicas' weights w0; the worker takes H steps of the inner optimizer (the
// job's `optimizer`) on its own batches; the pseudo-gradient w0 - w_H then goes through the scheme
// as a gradient would (error feedback included), and the weights go back to w0, where the Replica
// applies the round's aggregate with the outer (replicated) optimizer.
//
//   LocalSteps local(job.optimizer, job.layout, plan.local_steps, job.train.keep_inner_state);
//   session.Join(params, &local);                           // restores a kept state from the state file
//   local.Begin(params);                                    // every round
//   for h in [0, H): backward into grads; local.Step(grads, params, round, h, plan.EpochOf(round, h));
//   const float* delta = local.Finish(params).value();      // params are w0 again
//   session.Step(round, loss, delta, params);               // the outer step on the aggregate
//
// The inner optimizer's state (SGD's velocity, Adam's moments), train.inner_state:
// - reset (keep_state false, the default): zeroed at every round's start, so a round boundary holds
//   nothing beyond the replicas' weights and the scheme's state; Adam's step count is the inner step's
//   index h in the round plus one;
// - keep: carried from round to round (DiLoCo's choice), Adam's step count is round * H + h + 1
//   (torch's AdamW count on a worker that started at step 0). The state is this worker's own: it is
//   saved in the worker's state files (WorkerLocalState, session/scheme_state_file.h), so a restarted
//   worker (--state-dir, --resume) goes on exactly; a worker without them (an elastic joiner, a
//   decentralized joiner) starts from zero, and the survivors of a decentralized regroup keep theirs.
// Pointers are to the whole flat vector (device memory where the kernels run). Not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/layout.h"
#include "engine/optimizer.h"
#include "kernels/backend.h"
#include "session/scheme_state_file.h"

namespace sketchps::worker {

class LocalSteps final : public session::WorkerLocalState {
 public:
  // `inner`: the job's optimizer (not external); `layers`: the whole vector's (optimizer.no_decay);
  // `steps_per_round`: H (RoundPlan::local_steps); `keep_state`: train.inner_state keep.
  LocalSteps(const OptimizerConfig& inner, const LayerTable& layers, std::uint64_t steps_per_round, bool keep_state);

  // Keeps d_params (dim() floats) as the round's start; zeroes the inner optimizer's state unless kept.
  absl::Status Begin(const float* d_params);
  // One inner step d_params <- step(d_params, d_grads) of round `round`: `step` < H is its index in the
  // round, `epoch` the fractional epoch of the learning-rate schedule.
  absl::Status Step(const float* d_grads, float* d_params, std::uint64_t round, std::uint64_t step, double epoch);
  // The pseudo-gradient start - d_params (owned here, valid until the next Begin); d_params is set back
  // to the round's start. FailedPrecondition without a Begin.
  absl::StatusOr<const float*> Finish(float* d_params);

  std::uint64_t dim() const { return dim_; }

  // WorkerLocalState: the kept inner optimizer state (empty without keep), so the state files carry it.
  std::vector<float> SaveLocal() const override;
  std::uint64_t local_size() const override;
  // InvalidArgument when the size is not local_size(); nothing changes then.
  absl::Status RestoreLocal(const std::vector<float>& state) override;

 private:
  const std::uint64_t dim_;
  const std::uint64_t steps_per_round_;
  const bool keep_;
  Optimizer inner_;
  kernels::Scratch scratch_;
  kernels::Exec exec_;
  kernels::DeviceArray<float> start_;  // the round-start weights w0
  kernels::DeviceArray<float> delta_;  // w0 - w_H
  bool begun_ = false;
};

}  // namespace sketchps::worker
