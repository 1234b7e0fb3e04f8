// LocalSteps: one worker's side of train.local_steps (job/job_spec.h, docs/methods.md "Local steps").
// A round starts at the replicas' weights w0; the worker takes H steps of the inner optimizer (the
// job's `optimizer`) on its own batches; the pseudo-gradient w0 - w_H then goes through the scheme
// as a gradient would (error feedback included), and the weights go back to w0, where the Replica
// applies the round's aggregate with the outer (replicated) optimizer.
//
//   LocalSteps local(job.optimizer, job.layout);
//   local.Begin(params);                                    // every round
//   for h in [0, H): backward into grads; local.Step(grads, params, h, plan.EpochOf(round, h));
//   const float* delta = local.Finish(params).value();      // params are w0 again
//   session.Step(round, loss, delta, params);               // the outer step on the aggregate
//
// The inner optimizer's state (SGD's velocity, Adam's moments) starts at zero every round, so a
// round boundary holds nothing beyond the replicas' weights and the scheme's state: a restarted
// worker (--state-dir, --resume) and a decentralized regroup lose nothing. Adam's step count is the
// inner step's index in the round plus one.
// Pointers are to the whole flat vector (device memory where the kernels run). Not thread-safe.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/layout.h"
#include "engine/optimizer.h"
#include "kernels/backend.h"

namespace sketchps::worker {

class LocalSteps {
 public:
  // `inner`: the job's optimizer (not external); `layers`: the whole vector's (optimizer.no_decay).
  LocalSteps(const OptimizerConfig& inner, const LayerTable& layers);

  // Keeps d_params (dim() floats) as the round's start and zeroes the inner optimizer's state.
  absl::Status Begin(const float* d_params);
  // One inner step d_params <- step(d_params, d_grads): `step` < H is its index in the round, `epoch`
  // the fractional epoch of the learning-rate schedule.
  absl::Status Step(const float* d_grads, float* d_params, std::uint64_t step, double epoch);
  // The pseudo-gradient start - d_params (owned here, valid until the next Begin); d_params is set back
  // to the round's start. FailedPrecondition without a Begin.
  absl::StatusOr<const float*> Finish(float* d_params);

  std::uint64_t dim() const { return dim_; }

 private:
  const std::uint64_t dim_;
  Optimizer inner_;
  kernels::Scratch scratch_;
  kernels::Exec exec_;
  kernels::DeviceArray<float> start_;  // the round-start weights w0
  kernels::DeviceArray<float> delta_;  // w0 - w_H
  bool begun_ = false;
};

}  // namespace sketchps::worker
