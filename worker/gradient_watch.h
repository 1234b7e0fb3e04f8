// GradientWatch: the libtorch half of the overlap of backward and exchange in the C++ trainer. It
// installs a post hook on each parameter's gradient accumulator (as DDP's reducer does; it runs on
// the autograd thread) that tells a ShardReadiness (session/shard_readiness.h) the parameter's
// gradient is complete in the flat buffer; the readiness calls ready(s) once each shard's gradients
// all are, so the worker pushes that shard while backward goes on with earlier layers.
//
//   GradientWatch watch = *GradientWatch::Create(model.flat(), shards);
//   watch.Arm([&](std::uint32_t s) { ready[s].Notify(); });   // before each backward
//   model.ForwardBackward(...);                                // hooks call ready(s) as layers finish
//   watch.Finish();                                            // ready(s) for every shard not yet signalled
//
// Updating a complete shard's weights while backward continues is safe: a leaf's accumulator runs
// after every node that saved that leaf, so no remaining node reads it. A second backward in one
// armed round (gradient accumulation) would push a shard before its gradients are complete:
// repeated() tells that it happened (the caller refuses the round).
//
// Not thread-safe except for the hooks themselves (which only count). The watch must outlive every
// backward it is armed for. (The Python package registers its own hooks in Python and drives a
// ShardReadiness through sketchps._core: python/sketchps/_flat.py.)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "common/layout.h"
#include "session/shard_readiness.h"
#include "worker/flat_model.h"

namespace sketchps::worker {

class GradientWatch {
 public:
  static absl::StatusOr<std::unique_ptr<GradientWatch>> Create(FlatModel& model, const ShardMap& shards);
  ~GradientWatch();

  void Arm(std::function<void(std::uint32_t)> ready) { readiness_->Arm(std::move(ready)); }
  void Finish() { readiness_->Finish(); }
  // Whether a parameter's gradient was accumulated twice since the last Arm.
  bool repeated() const { return readiness_->repeated(); }

 private:
  struct Hooks;
  GradientWatch() = default;

  std::unique_ptr<session::ShardReadiness> readiness_;
  std::unique_ptr<Hooks> hooks_;  // keeps the accumulators (and their hooks) alive
};

}  // namespace sketchps::worker
