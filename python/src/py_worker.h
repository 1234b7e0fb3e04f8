// PyWorker: what one Python training process holds (python/sketchps/torch.py drives it): the user's
// trainable parameters flattened into one parameter and one gradient buffer (worker/flat_model.h:
// the tensors the user holds become views, nothing is copied per round) and a Session
// (worker/session.h) over them, the same round engine as the C++ worker's.
//
// Order of use: Create (joins: the parameters then hold the servers' weights, or in decentralized
// mode this worker's own), then per round ZeroGrad, the caller's backward, Step; Evaluate after a
// Step; Finish once. Calls out of this order are FailedPrecondition naming the call. Every blocking
// call runs without the GIL (the binding releases it). Not thread-safe.
//
// With `overlap`, ZeroGrad starts the next round in flight (worker/session.h StartRound) and arms a
// GradientWatch: during the caller's backward each shard's exchange starts as soon as its
// gradients are complete, as in the C++ worker; Step then waits for the shards. A second backward
// before Step (gradient accumulation) is refused at Step: it would have pushed partial gradients.
// Decentralized mode with peer.on_failure regroup: a round that fails because a peer is lost makes
// the survivors regroup (Session::Recover): the parameters and the optimizer state roll back to
// the agreed round, next_round() moves back to it, and Step's record carries "regroup".
//
// optimizer.name external (a torch optimizer applies the update, Horovod-style): the round writes
// the aggregate G_t into the gradient buffer instead of updating the parameters (engine/optimizer.h),
// the servers hold G_t as their copy and compare its checksum with the worker's every round, and the
// caller then steps its torch optimizer. Step's record carries "aggregate_checksum"; the record
// written to the metrics has "checksum" of the parameters after the caller's update (it is written at
// the next Step, Finish or Abandon). Such a worker cannot rejoin a running job (the torch optimizer's
// state is the script's).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "worker/fashion_mnist.h"
#include "worker/flat_model.h"
#include "worker/gradient_watch.h"
#include "worker/session.h"

namespace sketchps::python {

struct WorkerConfig {
  std::uint32_t rank = 0;
  std::string servers;  // ps: comma-separated by shard, or one address with {shard} (common/config/cli.h)
  std::string listen;   // decentralized: this worker's Peer service
  std::string peers;    // decentralized: every rank's address, comma-separated ("" : peers_file)
  std::string peers_file;
  std::string port_file;
  std::string tls_dir;      // `sketchps certs` folder ...
  bool insecure = false;    // ... or plaintext: exactly one of the two (common/config/cli.h ResolveTls)
  std::string metrics_out;  // JSON lines, one per round ("" : none)
  std::string state_dir;    // ps: the schemes' state across restarts (worker/session.h; "" : none)
  std::uint64_t state_every_rounds = 1;
  std::string checkpoint_key_file;  // the state files' integrity key (common/wire/file_key.h; "" : untagged)
  double patience_seconds = 120;
  double peer_timeout_seconds = 0;  // 0: the job's peer.timeout_seconds
};

class PyWorker {
 public:
  static absl::StatusOr<std::unique_ptr<PyWorker>> Create(const JobSpec& job, const WorkerConfig& config,
                                                          std::vector<std::pair<std::string, at::Tensor>> params,
                                                          const std::vector<std::string>& buffers, bool overlap);

  // One round with the gradients now in the buffer; returns the round's record (JSON, trainer.h;
  // without "loss" when `loss` is NaN: the caller gave none).
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
  // Zeroes the gradients; with overlap, starts the next round in flight (see above).
  absl::Status ZeroGrad();
  // DDP's no_sync(): between SetNoSync(true) and SetNoSync(false) backward passes only accumulate
  // (with overlap, the gradient watch is disarmed, and armed again on leaving, so the next backward,
  // the last of the step, starts each shard's exchange with the summed gradients). Step inside is
  // FailedPrecondition.
  absl::Status SetNoSync(bool on);
  // With overlap, after ZeroGrad: the gradients of these parameters (indices into the parameters
  // given to Create) are complete in the buffer, so each shard they complete starts its exchange now
  // (GradientWatch::MarkComplete). For callers whose gradients do not come from an autograd pass
  // over the parameters: the DDP comm hook copies DDP's buckets in. FailedPrecondition without
  // overlap or outside a round; InvalidArgument for an index out of range.
  absl::Status GradientsReady(const std::vector<std::uint32_t>& params);

  // This worker's sample indices of round `round` (the data order rule, worker/fashion_mnist.h).
  absl::StatusOr<std::vector<std::uint64_t>> BatchIndices(std::uint64_t round);

  std::uint64_t first_round() const { return first_round_; }
  std::uint64_t next_round() const { return next_round_; }
  std::uint64_t last_round() const { return session_->plan().last_round; }
  double epoch_of(std::uint64_t round) const { return session_->plan().EpochOf(round); }
  double learning_rate(std::uint64_t round) const;
  bool finished() const { return finished_; }
  at::Tensor params() const { return flat_.params_tensor(); }
  at::Tensor grads() const { return flat_.grads_tensor(); }

 private:
  PyWorker(worker::FlatModel flat, std::uint64_t seed) : flat_(std::move(flat)), order_(seed) {}
  absl::Status Usable(const char* call) const;
  // The round's exchange: landing the flight ZeroGrad started, or every shard now.
  absl::StatusOr<nlohmann::json> Exchange(float loss, double compute_seconds);
  // After a failed round: regroup (decentralized) or the failure.
  absl::StatusOr<nlohmann::json> Recover(const absl::Status& failure);
  // Where a round writes: the parameters (the replicated optimizer) or, external, the gradients.
  float* destination() { return external_ ? flat_.grads() : flat_.params(); }
  // Writes the pending record (external: with the checksum of the parameters as the caller left them).
  void WritePending();

  worker::FlatModel flat_;
  std::unique_ptr<worker::Session> session_;
  std::unique_ptr<worker::GradientWatch> watch_;  // with overlap
  std::optional<worker::RoundFlight> flight_;     // the round ZeroGrad started
  absl::Time flight_start_;
  worker::JsonLinesLog log_;
  worker::BatchOrder order_;
  std::optional<nlohmann::json> pending_;       // the last round's record, written at the next Step or Finish
  std::optional<nlohmann::json> regroup_note_;  // for the first record after a regroup
  std::uint64_t first_round_ = 0;
  std::uint64_t next_round_ = 0;
  bool finished_ = false;
  bool abandoned_ = false;  // by Abandon (finished_ is then set too)
  bool external_ = false;   // optimizer.name external
  bool no_sync_ = false;    // inside no_sync()
};

}  // namespace sketchps::python
