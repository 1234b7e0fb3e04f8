// GradientWatch: tells, during backward, when the gradients of a shard's range are complete, so that
// the worker can push that shard while backward goes on with earlier layers (DDP-style overlap;
// shards are layer-aligned where balance allows, common/layout.h).
//
//   GradientWatch watch = *GradientWatch::Create(model.flat(), shards);
//   watch.Arm([&](std::uint32_t s) { ready[s].Notify(); });   // before each backward
//   model.ForwardBackward(...);                                // hooks call ready(s) as layers finish
//   watch.Finish();                                            // ready(s) for every shard not yet signalled
//
// A shard is complete once every parameter overlapping its range has had its gradient accumulated
// into the flat buffer (a post hook on each parameter's gradient accumulator, as DDP's reducer uses;
// it runs on the autograd thread). ready(s) is called exactly once per armed backward for each shard:
// by the hook of its last parameter, or by Finish() when some parameter received no gradient (unused
// in this forward). Updating a complete shard's weights while backward continues is safe: a leaf's
// accumulator runs after every node that saved that leaf, so no remaining node reads it.
//
// A second backward in one armed round (gradient accumulation) would push a shard before its
// gradients are complete: repeated() tells that it happened (the caller refuses the round).
//
// Works on any FlatModel (a libtorch module, or the Python package's parameters). Not thread-safe
// except for the hooks themselves (which only count). The watch must outlive every backward it is
// armed for.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/layout.h"
#include "worker/flat_model.h"

namespace sketchps::worker {

class GradientWatch {
 public:
  static absl::StatusOr<std::unique_ptr<GradientWatch>> Create(FlatModel& model, const ShardMap& shards);
  ~GradientWatch();

  void Arm(std::function<void(std::uint32_t)> ready);
  // Hooks only accumulate until the next Arm (gradient accumulation: the backward passes of DDP's
  // no_sync(); the caller arms again before the last one). Not during a backward.
  void Disarm() { ready_ = nullptr; }
  void Finish();
  // Whether a parameter's gradient was accumulated twice since the last Arm.
  bool repeated() const { return repeated_.load(); }
  bool armed() const { return static_cast<bool>(ready_); }
  // Tells the watch that parameter `param`'s gradient is complete, for callers that learn it outside
  // autograd: the DDP comm hook (python/sketchps/ddp.py), which copies DDP's buckets into the flat
  // buffer. The same as the parameter's accumulator hook firing. Out of range: ignored.
  void MarkComplete(std::size_t param) {
    if (param < shards_of_param_.size()) OnParameter(param);
  }

 private:
  struct Hooks;
  GradientWatch() = default;
  void OnParameter(std::size_t param);
  void Signal(std::uint32_t shard);

  std::vector<std::vector<std::uint32_t>> shards_of_param_;  // constant after Create
  std::vector<std::uint32_t> params_of_shard_;               // constant after Create
  std::unique_ptr<std::atomic<std::uint32_t>[]> remaining_;  // per shard, reset by Arm
  std::unique_ptr<std::atomic<bool>[]> signalled_;           // per shard, reset by Arm
  std::unique_ptr<std::atomic<bool>[]> seen_;                // per parameter, reset by Arm
  std::atomic<bool> repeated_{false};
  std::function<void(std::uint32_t)> ready_;
  std::unique_ptr<Hooks> hooks_;  // keeps the accumulators (and their hooks) alive
};

}  // namespace sketchps::worker
