// ShardReadiness: which shards' gradients are complete, given which parameters' gradients are done,
// so that a worker can push a shard while backward goes on with earlier layers (DDP-style overlap;
// shards are layer-aligned where balance allows, common/layout.h). No torch: whoever learns that a
// parameter's gradient is complete calls MarkComplete (worker/gradient_watch.h: libtorch's
// accumulator hooks in the C++ trainer; the Python package's hooks and its DDP comm hook through
// sketchps._core).
//
//   auto readiness = *ShardReadiness::Create(layers, shards);
//   readiness->Arm([&](std::uint32_t s) { flight.Ready(s); });   // before each backward
//   ... readiness->MarkComplete(param) as each parameter's gradient is accumulated ...
//   readiness->Finish();                                        // ready(s) for every shard not yet signalled
//
// A shard is complete once every parameter overlapping its range is. ready(s) is called exactly once
// per armed backward for each shard: by the MarkComplete of its last parameter, or by Finish() when
// some parameter received no gradient (unused in this forward).
//
// A parameter marked twice in one armed round (a second backward: gradient accumulation) means a
// shard may have been pushed before its gradients were complete: repeated() tells that it happened
// (the caller refuses the round).
//
// Thread-safety: MarkComplete may be called from several threads at once (autograd threads); Arm,
// Disarm and Finish must not run concurrently with it or with each other.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/layout.h"

namespace sketchps::session {

class ShardReadiness {
 public:
  // InvalidArgument when the layer table is empty or the shard map has no shard.
  static absl::StatusOr<std::unique_ptr<ShardReadiness>> Create(const LayerTable& layers, const ShardMap& shards);

  // Starts a round: every shard incomplete, no parameter seen; `ready` is called once per shard.
  void Arm(std::function<void(std::uint32_t)> ready);
  // MarkComplete only records nothing until the next Arm (the backward passes of DDP's no_sync();
  // the caller arms again before the last one). Not during a backward.
  void Disarm() { ready_ = nullptr; }
  // Signals every shard not yet signalled, then disarms.
  void Finish();
  // Parameter `param`'s gradient is complete (an index into the layer table). Ignored when not armed
  // or out of range.
  void MarkComplete(std::size_t param);

  // Whether a parameter was marked twice since the last Arm.
  bool repeated() const { return repeated_.load(); }
  bool armed() const { return static_cast<bool>(ready_); }
  std::size_t num_params() const { return shards_of_param_.size(); }

 private:
  ShardReadiness() = default;
  void Signal(std::uint32_t shard);

  std::vector<std::vector<std::uint32_t>> shards_of_param_;  // constant after Create
  std::vector<std::uint32_t> params_of_shard_;               // constant after Create
  std::unique_ptr<std::atomic<std::uint32_t>[]> remaining_;  // per shard, reset by Arm
  std::unique_ptr<std::atomic<bool>[]> signalled_;           // per shard, reset by Arm
  std::unique_ptr<std::atomic<bool>[]> seen_;                // per parameter, reset by Arm
  std::atomic<bool> repeated_{false};
  std::function<void(std::uint32_t)> ready_;
};

}  // namespace sketchps::session
