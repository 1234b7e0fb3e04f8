#include "python/src/py_worker.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/config/cli.h"
#include "common/status.h"
#include "common/wire/file_key.h"
#include "engine/optimizer.h"
#include "kernels/vector_ops.h"

namespace sketchps::pycore {
namespace {

absl::StatusOr<session::SessionOptions> SessionOptionsOf(const JobSpec& job, const WorkerConfig& c) {
  session::SessionOptions o;
  o.job = job;
  o.rank = c.rank;
  if (!job.decentralized()) {
    SKETCHPS_ASSIGN_OR_RETURN(o.servers, ServerAddresses(c.servers, job.servers));
  }
  o.listen = c.listen;
  o.peers = absl::StrSplit(c.peers, ',', absl::SkipEmpty());
  o.peers_file = c.peers_file;
  o.port_file = c.port_file;
  o.state_dir = c.state_dir;
  o.state_every_rounds = c.state_every_rounds;
  SKETCHPS_ASSIGN_OR_RETURN(o.checkpoint_key, FileKey::LoadIfGiven(c.checkpoint_key_file));
  o.patience = absl::Seconds(c.patience_seconds);
  o.peer_timeout = absl::Seconds(c.peer_timeout_seconds > 0 ? c.peer_timeout_seconds : job.peer.timeout_seconds);
  SKETCHPS_ASSIGN_OR_RETURN(o.tls,
                            ResolveTls(TlsFlags{c.tls_dir, c.insecure}, Identity{Identity::Role::kWorker, c.rank}));
  return o;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PyWorker>> PyWorker::Create(const JobSpec& job, const WorkerConfig& config,
                                                           ModelBuffers model, bool overlap) {
  SKETCHPS_ASSIGN_OR_RETURN(auto options, SessionOptionsOf(job, config));
  std::unique_ptr<PyWorker> w(new PyWorker(std::move(model), job.train.seed));
  SKETCHPS_RETURN_IF_ERROR(w->log_.Open(config.metrics_out));
  SKETCHPS_ASSIGN_OR_RETURN(w->session_, session::Session::Create(options, w->model_.layers, w->model_.params));
  // With local steps the replicas apply the outer optimizer, also when a torch optimizer takes the
  // inner steps (JobSpec::replicated_optimizer): the round writes the parameters.
  w->external_ = job.replicated_optimizer().kind == OptimizerKind::kExternal;
  if (job.local_steps()) {
    w->local_ = std::make_unique<worker::LocalSteps>(job.optimizer, w->model_.layers, w->session_->plan().local_steps,
                                                     job.train.keep_inner_state);
    w->torch_inner_ = job.optimizer.kind == OptimizerKind::kExternal;
    overlap = false;  // the exchange starts after the last inner step: nothing to overlap with
  }
  SKETCHPS_ASSIGN_OR_RETURN(w->first_round_, w->session_->Join(w->model_.params, w->local_.get()));
  // optimizer.name external at a first round > 0: the package restores the script's state of that round
  // (model, torch optimizer, schedulers: python/sketchps/_resume.py) or refuses, naming the file.
  w->next_round_ = w->first_round_;
  w->session_->RememberRoundStart(w->next_round_, w->model_.params);
  if (overlap) {
    SKETCHPS_ASSIGN_OR_RETURN(w->readiness_, session::ShardReadiness::Create(w->model_.layers, w->session_->shards()));
  }
  return w;
}

void PyWorker::Arm() {
  readiness_->Arm([flight = &*flight_](std::uint32_t s) { flight->Ready(s); });
}

absl::Status PyWorker::StartRound(double computed_seconds) {
  SKETCHPS_RETURN_IF_ERROR(Usable("zero_grad"));
  if (flight_ && readiness_->repeated()) {
    return absl::FailedPreconditionError("zero_grad: called again after backward, before step()");
  }
  if (readiness_ && !flight_ && next_round_ < last_round()) {
    flight_ = session_->StartRound(next_round_, model_.grads, destination());
    flight_start_ = absl::Now() - absl::Seconds(std::max(0.0, computed_seconds));
    if (!no_sync_) Arm();
  }
  return absl::OkStatus();
}

absl::Status PyWorker::SetNoSync(bool on) {
  SKETCHPS_RETURN_IF_ERROR(Usable("no_sync"));
  if (on == no_sync_) {
    return absl::FailedPreconditionError(on ? "no_sync: already inside no_sync()" : "no_sync: not inside no_sync()");
  }
  no_sync_ = on;
  if (!readiness_ || !flight_) return absl::OkStatus();  // no overlap, or no round started yet (StartRound arms)
  if (on) {
    readiness_->Disarm();
  } else {
    Arm();
  }
  return absl::OkStatus();
}

absl::Status PyWorker::GradientsReady(const std::vector<std::uint32_t>& params) {
  SKETCHPS_RETURN_IF_ERROR(Usable("ready"));
  if (!readiness_ || !flight_ || !readiness_->armed()) {
    return absl::FailedPreconditionError(
        "ready: no round in flight with overlap (create the worker with overlap and call zero_grad first)");
  }
  const std::size_t count = model_.layers.layers.size();
  for (std::uint32_t p : params) {
    if (p >= count) {
      return absl::InvalidArgumentError(absl::StrCat("ready: parameter ", p, " is not in [0, ", count, ")"));
    }
    readiness_->MarkComplete(p);
  }
  return absl::OkStatus();
}

void PyWorker::GradientAccumulated(std::uint32_t param) {
  if (readiness_ && flight_) readiness_->MarkComplete(param);  // ignored when not armed
}

absl::StatusOr<nlohmann::json> PyWorker::Exchange(float loss, double compute_seconds) {
  if (!flight_) {
    return session_->Step(next_round_, loss, model_.grads, destination(), absl::Seconds(compute_seconds));
  }
  readiness_->Finish();
  const bool repeated = readiness_->repeated();
  session::RoundRuns runs = session_->Land(*flight_, flight_start_);
  flight_.reset();
  if (repeated) {
    return absl::FailedPreconditionError(
        "step: more than one backward in this round while its exchange overlapped the first one, so partial "
        "gradients were sent; to accumulate gradients over several backward passes, create "
        "DistributedOptimizer(..., overlap=False)");
  }
  return session_->Complete(next_round_, loss, std::move(runs), destination());
}

absl::Status PyWorker::KeepRoundStart() {
  SKETCHPS_RETURN_IF_ERROR(Usable("step"));
  if (!local_ || round_kept_) return absl::OkStatus();
  SKETCHPS_RETURN_IF_ERROR(local_->Begin(model_.params));
  // The copy is queued: torch's optimizer may write the parameters next, on a stream of its own.
  kernels::Synchronize(kernels::Exec{nullptr, &scratch_});
  round_kept_ = true;
  return absl::OkStatus();
}

absl::Status PyWorker::RoundStartKept() {
  // A torch optimizer's inner step has moved the parameters: the start must have been kept before it.
  if (torch_inner_ && !round_kept_) {
    return absl::FailedPreconditionError(
        "step: train.local_steps with a torch optimizer: keep_round_start() must come before its first inner step");
  }
  return KeepRoundStart();
}

absl::StatusOr<std::string> PyWorker::InnerStep(float loss, double compute_seconds) {
  SKETCHPS_RETURN_IF_ERROR(RoundStartKept());
  const std::uint64_t h = inner_;
  if (!torch_inner_) {
    SKETCHPS_RETURN_IF_ERROR(
        local_->Step(model_.grads, model_.params, next_round_, h, session_->plan().EpochOf(next_round_, h)));
    kernels::Synchronize(kernels::Exec{nullptr, &scratch_});  // torch may read the buffers next
  }
  inner_loss_ += loss;  // as the C++ worker: floats summed in double (worker/trainer.cc RunLocalRound)
  inner_compute_ += compute_seconds;
  ++inner_;
  nlohmann::json record{
      {"round", next_round_}, {"local_step", h}, {"local_steps", session_->plan().local_steps}, {"loss", loss}};
  if (std::isnan(loss)) record.erase("loss");
  return record.dump();
}

// The round's last inner step, then the exchange of w0 - w_H from w0 (worker/trainer.cc
// RunLocalRound: the same calls in the same order, so the same bits).
absl::StatusOr<nlohmann::json> PyWorker::LocalExchange(float loss, double compute_seconds) {
  SKETCHPS_RETURN_IF_ERROR(RoundStartKept());
  const std::uint64_t h = inner_;
  const std::uint64_t steps = session_->plan().local_steps;
  const double loss_sum = inner_loss_ + loss;
  const double compute = inner_compute_ + compute_seconds;
  inner_ = 0;
  inner_loss_ = inner_compute_ = 0;
  round_kept_ = false;
  if (!torch_inner_) {
    SKETCHPS_RETURN_IF_ERROR(
        local_->Step(model_.grads, model_.params, next_round_, h, session_->plan().EpochOf(next_round_, h)));
  }
  SKETCHPS_ASSIGN_OR_RETURN(const float* delta, local_->Finish(model_.params));
  const auto mean_loss = static_cast<float>(loss_sum / static_cast<double>(steps));
  return session_->Step(next_round_, mean_loss, delta, model_.params, absl::Seconds(compute));
}

absl::StatusOr<nlohmann::json> PyWorker::Recover(const absl::Status& failure) {
  nlohmann::json note;
  SKETCHPS_ASSIGN_OR_RETURN(const Regrouped g, session_->Recover(failure, next_round_, model_.params, &note));
  nlohmann::json record{{"round", next_round_}, {"regroup", note}, {"redo_from", g.round}};
  regroup_note_ = note;
  next_round_ = g.round;
  session_->RememberRoundStart(next_round_, model_.params);
  return record;
}

void PyWorker::WritePending() {
  if (!pending_) return;
  if (external_) {
    // Where the parameters live (kernels::Checksum runs on the loaded kernels' memory).
    const kernels::Exec exec{nullptr, &scratch_};
    const auto checksum = kernels::Checksum(model_.params, model_.layers.dim(), exec);
    if (checksum.ok()) (*pending_)["checksum"] = absl::StrFormat("%016x", *checksum);
  }
  log_.Write(*std::exchange(pending_, std::nullopt));
}

absl::Status PyWorker::Usable(const char* call) const {
  if (abandoned_) {
    return absl::FailedPreconditionError(absl::StrCat(call, ": called after the job was left on an error"));
  }
  if (finished_) return absl::FailedPreconditionError(absl::StrCat(call, ": called after finish()"));
  return absl::OkStatus();
}

absl::StatusOr<std::string> PyWorker::Step(float loss, double compute_seconds) {
  SKETCHPS_RETURN_IF_ERROR(Usable("step"));
  if (no_sync_) {
    return absl::FailedPreconditionError(
        "step: inside no_sync() (its backward passes only accumulate; step after the last backward, outside it)");
  }
  if (next_round_ >= last_round()) {
    return absl::FailedPreconditionError(absl::StrCat("step: the job's ", last_round(), " rounds are done (check ",
                                                      "DistributedOptimizer.done before stepping)"));
  }
  if (local_ && inner_ + 1 < session_->plan().local_steps) return InnerStep(loss, compute_seconds);
  auto exchanged = local_ ? LocalExchange(loss, compute_seconds) : Exchange(loss, compute_seconds);
  if (!exchanged.ok()) {
    SKETCHPS_ASSIGN_OR_RETURN(nlohmann::json regrouped, Recover(exchanged.status()));
    return regrouped.dump();  // the next round is the one the survivors go on from
  }
  nlohmann::json& record = *exchanged;
  if (std::isnan(loss)) record.erase("loss");  // step() without a loss
  if (regroup_note_) record["regroup"] = *std::exchange(regroup_note_, std::nullopt);
  if (external_) record["aggregate_checksum"] = record["checksum"];
  WritePending();
  pending_ = record;
  ++next_round_;
  session_->RememberRoundStart(next_round_, model_.params);
  kernels::Synchronize(kernels::Exec{nullptr, &scratch_});  // torch may read the buffers next, on its own stream
  return record.dump();
}

absl::StatusOr<std::string> PyWorker::Evaluate(double correct, double samples, double loss_sum, double seconds,
                                               bool final) {
  SKETCHPS_RETURN_IF_ERROR(Usable("evaluate"));
  if (!pending_) return absl::FailedPreconditionError("evaluate: no round has run yet (evaluate after step())");
  const std::uint64_t round = next_round_ - 1;
  if (const auto it = pending_->find("test_accuracy"); it != pending_->end()) {
    // A second one would overwrite the first in the round's record (a final one, too).
    return absl::FailedPreconditionError(
        absl::StrCat("evaluate: round ", round, " already has its evaluation (test_accuracy ", it->dump(),
                     pending_->value("final", false) ? ", final" : "",
                     "); the record holds one per round: evaluate once after a round, with final=True after the last"));
  }
  SKETCHPS_RETURN_IF_ERROR(session::CheckEvaluationShare(round, correct, samples, loss_sum));
  SKETCHPS_ASSIGN_OR_RETURN(
      auto sums, session_->SumOverWorkers(
                     round, {static_cast<float>(correct), static_cast<float>(samples), static_cast<float>(loss_sum)}));
  SKETCHPS_RETURN_IF_ERROR(session::AddEvaluation(*pending_, round, sums[0], sums[1], sums[2], seconds, final));
  return nlohmann::json{{"accuracy", sums[0] / sums[1]}, {"loss", sums[2] / sums[1]}, {"samples", sums[1]}}.dump();
}

absl::Status PyWorker::Finish() {
  if (finished_) return absl::OkStatus();
  finished_ = true;
  WritePending();
  return session_->Finish(next_round_);
}

absl::Status PyWorker::Abandon(const std::string& reason) {
  if (finished_) return absl::OkStatus();
  finished_ = true;
  abandoned_ = true;
  WritePending();
  return session_->ReportFailure(next_round_, reason);
}

absl::StatusOr<std::vector<std::uint64_t>> PyWorker::BatchIndices(std::uint64_t round, std::uint64_t step) {
  if (round >= last_round()) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_indices: round ", round, " is not in [0, ", last_round(), ")"));
  }
  if (step >= session_->plan().local_steps) {
    return absl::InvalidArgumentError(absl::StrCat("batch_indices: step ", step, " is not in [0, ",
                                                   session_->plan().local_steps, ") (train.local_steps)"));
  }
  SKETCHPS_ASSIGN_OR_RETURN(auto span, order_.Of(session_->plan(), round, step));
  return std::vector<std::uint64_t>(span.begin(), span.end());
}

double PyWorker::learning_rate(std::uint64_t round, std::uint64_t step) const {
  const double epoch = local_ ? session_->plan().EpochOf(round, step) : epoch_of(round);
  return LearningRate(session_->job().optimizer.lr, epoch);
}

}  // namespace sketchps::pycore
