// PyWorker: what one Python training process holds (python/sketchps/torch.py drives it through the
// Worker of sketchps/python_core.h): a Session (session/session.h) over the model's two flat buffers,
// the same round engine as the C++ worker's. Python makes the buffers (python/sketchps/_flat.py: the
// user's trainable parameters and their .grad are views into them, nothing is copied per round) and
// passes their addresses; they live where the loaded kernels run (host memory for the CPU kernels,
// CUDA memory for the CUDA ones), and PyWorker only hands them to the Session and the kernels
// (kernels::Checksum): it never reads them on the host.
//
// Order of use: Create (joins: the parameters then hold the servers' weights, or in decentralized
// mode this worker's own), then per round StartRound, the caller zeroing the gradients and its
// backward, Step; Evaluate after a Step; Finish once. Calls out of this order are FailedPrecondition
// naming the call. Every blocking call runs without the GIL (the binding releases it). Not
// thread-safe, except GradientAccumulated (autograd threads).
//
// With `overlap`, StartRound starts the round in flight (session/session.h StartRound) and arms a
// ShardReadiness (session/shard_readiness.h): during the caller's backward, Python's hook on each
// parameter's gradient accumulator calls GradientAccumulated, and each shard's exchange starts as
// soon as its gradients are complete, as in the C++ worker; Step then waits for the shards. A second
// backward before Step (gradient accumulation) is refused at Step: it would have pushed partial
// gradients. Decentralized mode with peer.on_failure regroup: a round that fails because a peer is
// lost makes the survivors regroup (Session::Recover): the parameters and the optimizer state roll
// back to the agreed round, next_round() moves back to it, and Step's record carries "regroup".
//
// optimizer.name external (a torch optimizer applies the update, Horovod-style): the round writes
// the aggregate G_t into the gradient buffer instead of updating the parameters (engine/optimizer.h),
// the servers hold G_t as their copy and compare its checksum with the worker's every round, and the
// caller then steps its torch optimizer. Step's record carries "aggregate_checksum"; the record
// written to the metrics has "checksum" of the parameters after the caller's update (it is written at
// the next Step, Finish or Abandon). Such a worker cannot rejoin a running job (the torch optimizer's
// state is the script's).
//
// train.local_steps (docs/methods.md "Local steps", session/round_plan.h): a round is H Steps, each
// one inner step. The first keeps the parameters as the round's start w0 (worker/local_steps.h);
// each takes the job's optimizer's step on this worker's gradient (sketchps applies it), or, with
// optimizer.name external, none: the caller's torch optimizer stepped the parameters already, after
// KeepRoundStart. The H-th Step exchanges the pseudo-gradient w0 - w_H, sets the parameters back to
// w0 and applies the round's aggregate with the outer optimizer (JobSpec::replicated_optimizer; the
// servers then hold weights, also with external), so its record is the round's, as the C++ worker's
// (loss: the inner steps' mean; compute_s: their sum); the other Steps return
// {"round", "local_step", "local_steps", "loss"} and write nothing. Overlap is off (nothing to
// overlap with: the exchange starts after the last inner step).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "common/layout.h"
#include "kernels/backend.h"
#include "session/session.h"
#include "session/shard_readiness.h"
#include "sketchps/python_core.h"
#include "worker/fashion_mnist.h"
#include "worker/local_steps.h"

namespace sketchps::pycore {

// The model's flat buffers: `layers` in flat order, params and grads of layers.dim() floats each in
// the loaded kernels' memory, owned by the caller.
struct ModelBuffers {
  LayerTable layers;
  float* params = nullptr;
  float* grads = nullptr;
  // params and grads, registered for the kernels' device memory checks while the worker has them
  // (kernels/backend.h; on CUDA the driver decides and these are not consulted).
  kernels::DeviceMemoryRegistration params_memory, grads_memory;
};

class PyWorker {
 public:
  static absl::StatusOr<std::unique_ptr<PyWorker>> Create(const JobSpec& job, const WorkerConfig& config,
                                                          ModelBuffers model, bool overlap);

  // One round with the gradients now in the buffer; returns the round's record (JSON, trainer.h;
  // without "loss" when `loss` is NaN: the caller gave none). The kernels' work on the buffers is
  // done when it returns (the caller's torch reads them next, on any stream).
  absl::StatusOr<std::string> Step(float loss, double compute_seconds);
  // Sums this worker's evaluation counts with the others' and adds them to the last round's record.
  // Returns {"accuracy", "loss", "samples"} of the whole evaluation (JSON).
  absl::StatusOr<std::string> Evaluate(double correct, double samples, double loss_sum, double seconds, bool final);
  // Writes the last record and tells the servers this worker is done. Later calls do nothing.
  absl::Status Finish();
  // Instead of Finish when the script stops on an error (`reason`): writes the last record and tells
  // the servers this worker failed, not finished (Session::ReportFailure: one attempt per server,
  // a few seconds at most; decentralized mode: nothing to tell). Later calls do nothing; the
  // worker is then unusable, as after Finish.
  absl::Status Abandon(const std::string& reason);
  // With overlap, starts the next round in flight (see above). The caller zeroes the gradients.
  // `computed_seconds`: how long the round's compute already ran (the DDP comm hook starts the round
  // at the first bucket, after the forward and part of backward): the record's compute_s counts it.
  // FailedPrecondition when called again after a second backward, before Step.
  absl::Status StartRound(double computed_seconds = 0);
  // DDP's no_sync(): between SetNoSync(true) and SetNoSync(false) backward passes only accumulate
  // (with overlap, the readiness is disarmed, and armed again on leaving, so the next backward,
  // the last of the step, starts each shard's exchange with the summed gradients). Step inside is
  // FailedPrecondition.
  absl::Status SetNoSync(bool on);
  // With overlap, after StartRound: the gradients of these parameters (indices into the layer
  // table) are complete in the buffer, so each shard they complete starts its exchange now
  // (ShardReadiness::MarkComplete). For callers whose gradients do not come from an autograd pass
  // over the parameters: the DDP comm hook copies DDP's buckets in. FailedPrecondition without
  // overlap or outside a round; InvalidArgument for an index out of range.
  absl::Status GradientsReady(const std::vector<std::uint32_t>& params);
  // Parameter `param`'s gradient was accumulated by autograd (Python's accumulator hook): the same as
  // GradientsReady({param}) in an armed round, ignored otherwise (a backward outside the training
  // loop, or inside no_sync()). May run on an autograd thread.
  void GradientAccumulated(std::uint32_t param);

  // With local steps, before the caller's torch optimizer takes an inner step: keeps the parameters
  // as the round's start at its first inner step (then does nothing until the round ends).
  absl::Status KeepRoundStart();

  // This worker's sample indices of inner step `step` (< local_steps; 0 without local steps) of round
  // `round` (the data order rule, worker/fashion_mnist.h).
  absl::StatusOr<std::vector<std::uint64_t>> BatchIndices(std::uint64_t round, std::uint64_t step = 0);

  std::uint64_t first_round() const { return first_round_; }
  std::uint64_t next_round() const { return next_round_; }
  std::uint64_t last_round() const { return session_->plan().last_round; }
  double epoch_of(std::uint64_t round) const { return session_->plan().EpochOf(round); }
  // The job's optimizer's learning rate at inner step `step` of `round` (step 0 without local steps).
  double learning_rate(std::uint64_t round, std::uint64_t step = 0) const;
  std::uint64_t local_step() const { return inner_; }  // inner steps taken in the next round
  bool finished() const { return finished_; }

 private:
  PyWorker(ModelBuffers model, std::uint64_t seed) : model_(std::move(model)), order_(seed) {}
  absl::Status Usable(const char* call) const;
  // The round's exchange: landing the flight StartRound started, or every shard now.
  absl::StatusOr<nlohmann::json> Exchange(float loss, double compute_seconds);
  // Local steps: KeepRoundStart, or FailedPrecondition when a torch optimizer stepped before it.
  absl::Status RoundStartKept();
  // Local steps: an inner step that is not the round's last (its record; nothing written).
  absl::StatusOr<std::string> InnerStep(float loss, double compute_seconds);
  // Local steps: the round's last inner step and the pseudo-gradient's exchange.
  absl::StatusOr<nlohmann::json> LocalExchange(float loss, double compute_seconds);
  // After a failed round: regroup (decentralized) or the failure.
  absl::StatusOr<nlohmann::json> Recover(const absl::Status& failure);
  // Where a round writes: the parameters (the replicated optimizer) or, external, the gradients.
  float* destination() { return external_ ? model_.grads : model_.params; }
  // Writes the pending record (external: with the checksum of the parameters as the caller left them).
  void WritePending();
  void Arm();

  ModelBuffers model_;
  std::unique_ptr<session::Session> session_;
  std::unique_ptr<session::ShardReadiness> readiness_;  // with overlap
  std::unique_ptr<worker::LocalSteps> local_;           // with train.local_steps
  std::uint64_t inner_ = 0;                             // inner steps taken in the next round
  double inner_loss_ = 0;                               // their losses' sum
  double inner_compute_ = 0;                            // their compute seconds
  bool round_kept_ = false;                             // the round's start is kept (LocalSteps::Begin)
  std::optional<session::RoundFlight> flight_;          // the round StartRound started
  absl::Time flight_start_;
  kernels::Scratch scratch_;  // the external checksum's temporaries
  session::JsonLinesLog log_;
  worker::BatchOrder order_;
  std::optional<nlohmann::json> pending_;       // the last round's record, written at the next Step or Finish
  std::optional<nlohmann::json> regroup_note_;  // for the first record after a regroup
  std::uint64_t first_round_ = 0;
  std::uint64_t next_round_ = 0;
  bool finished_ = false;
  bool abandoned_ = false;    // by Abandon (finished_ is then set too)
  bool external_ = false;     // the replicas apply no update (optimizer.name external, no local steps)
  bool torch_inner_ = false;  // optimizer.name external with local steps: the caller's inner steps
  bool no_sync_ = false;      // inside no_sync()
};

}  // namespace sketchps::pycore
