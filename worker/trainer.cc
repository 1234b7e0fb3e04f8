#include "worker/trainer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/status.h"
#include "common/termination.h"
#include "common/wire/gradient_dump.h"
#include "engine/aggregator.h"
#include "engine/replica.h"
#include "ps/transport.h"
#include "session/round_plan.h"
#include "session/session.h"
#include "spdlog/spdlog.h"
#include "worker/batch.h"
#include "worker/evaluate.h"
#include "worker/gradient_watch.h"
#include "worker/local_steps.h"
#include "worker/models.h"
#include "worker/worker_metrics.h"

namespace sketchps::worker {
namespace {

// How long a SIGTERM waits for the round in progress (StopGracefullyOnTermination): every worker
// stopped together finishes it within this unless one of them had not started it (then it never
// completes, and the watchdog ends the wait). Below `sketchps run`'s 5 s before SIGKILL.
constexpr absl::Duration kStopGrace = absl::Seconds(2);

class Trainer {
 public:
  explicit Trainer(const TrainerOptions& options) : o_(options) {}

  absl::Status Prepare();
  absl::StatusOr<TrainSummary> Run();
  const SkippedRounds& skipped() const { return summary_.skipped; }

 private:
  absl::Status CheckOptions() const;
  // After a SIGTERM (StopGracefullyOnTermination), between rounds: waits for the state file being
  // written and ends the process as the signal would.
  [[noreturn]] void StopBefore(std::uint64_t round);
  absl::StatusOr<Batch> BatchOf(std::uint64_t round, std::uint64_t step = 0);
  absl::StatusOr<nlohmann::json> RunRound(std::uint64_t round);
  absl::StatusOr<nlohmann::json> RunLocalRound(std::uint64_t round);  // train.local_steps
  absl::Status Evaluate(std::uint64_t round, bool final, nlohmann::json& record);
  absl::Status DumpGradient(std::uint64_t round) const;
  void NoteSkipped(std::uint64_t round, const nlohmann::json& record);
  const session::RoundPlan& plan() const { return session_->plan(); }

  const TrainerOptions& o_;

  // The model and the data (constant after Prepare).
  std::unique_ptr<Model> model_;
  Dataset train_, test_;
  std::unique_ptr<GradientWatch> watch_;
  std::unique_ptr<LocalSteps> local_;  // with train.local_steps (JobSpec::local_steps()), else null

  // The membership: transport, replica, data plan and learning rate (session/session.h).
  std::unique_ptr<session::Session> session_;
  std::uint64_t start_round_ = 0;

  BatchOrder order_{o_.job.train.seed};

  // Decentralized regroup: the note for the next record.
  std::optional<nlohmann::json> regroup_note_;

  session::JsonLinesLog log_;
  TrainSummary summary_;
};

void Trainer::StopBefore(std::uint64_t round) {
  spdlog::info("SIGTERM: stopping before round {}; the state after {} rounds is saved", round, round);
  session_.reset();  // waits for the state file being written
  DieOfTermination();
}

absl::Status Trainer::CheckOptions() const {
  if (!o_.dump_rounds.empty() && o_.dump_dir.empty())
    return absl::InvalidArgumentError("--dump-gradients: needs --dump-dir");
  return absl::OkStatus();
}

absl::Status Trainer::Prepare() {
  SKETCHPS_RETURN_IF_ERROR(CheckOptions());
  // With its state saved every round (ps mode), a SIGTERM stops the worker between two rounds: it
  // never leaves a round pushed to some shards and not to others, so the shards, stopped after the
  // workers, and every worker's newest state file agree on the round a --resume continues from.
  if (!o_.job.decentralized() && !o_.state_dir.empty()) StopGracefullyOnTermination(kStopGrace);
  SKETCHPS_ASSIGN_OR_RETURN(Model model, Model::Create(o_.job.model, o_.job.train.seed));
  model_ = std::make_unique<Model>(std::move(model));
  SKETCHPS_ASSIGN_OR_RETURN(train_, LoadFashionMnist(o_.job.data.path, Split::kTrain));
  if (o_.job.data.train_samples > train_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("data.train_samples: ", o_.job.data.train_samples, " > the ",
                                                   train_.size(), " samples in ", o_.job.data.path));
  }
  SKETCHPS_ASSIGN_OR_RETURN(test_, LoadFashionMnist(o_.job.data.path, Split::kTest));
  SKETCHPS_ASSIGN_OR_RETURN(session_, session::Session::Create(o_, model_->flat().layers(), model_->flat().params()));
  SKETCHPS_ASSIGN_OR_RETURN(watch_, GradientWatch::Create(model_->flat(), session_->shards()));
  if (o_.job.local_steps()) {
    local_ = std::make_unique<LocalSteps>(o_.job.optimizer, model_->flat().layers(), plan().local_steps,
                                          o_.job.train.keep_inner_state);
  }
  SKETCHPS_ASSIGN_OR_RETURN(start_round_, session_->Join(model_->flat().params(), local_.get()));
  return log_.Open(o_.metrics_out, start_round_);
}

absl::StatusOr<Batch> Trainer::BatchOf(std::uint64_t round, std::uint64_t step) {
  SKETCHPS_ASSIGN_OR_RETURN(auto indices, order_.Of(plan(), round, step));
  return MakeBatch(train_, indices);
}

// Forward and backward on this thread; each shard's round on a thread of its own, started as soon as
// its gradients are complete (options.overlap) or after backward.
absl::StatusOr<nlohmann::json> Trainer::RunRound(std::uint64_t round) {
  if (local_ != nullptr) return RunLocalRound(round);
  const absl::Time start = absl::Now();
  SKETCHPS_ASSIGN_OR_RETURN(Batch batch, BatchOf(round));
  session::RoundFlight flight = session_->StartRound(round, model_->flat().grads(), model_->flat().params());
  if (o_.overlap) watch_->Arm([&flight](std::uint32_t s) { flight.Ready(s); });
  auto loss = model_->ForwardBackward(batch.input, batch.target);
  if (o_.overlap) watch_->Finish();
  if (loss.ok() && o_.dump_rounds.contains(round)) {
    if (auto st = DumpGradient(round); !st.ok()) spdlog::warn("{}", std::string(st.message()));
  }
  session::RoundRuns runs = session_->Land(flight, start, /*abandon=*/!loss.ok());
  SKETCHPS_RETURN_IF_ERROR(loss.status());
  return session_->Complete(round, *loss, std::move(runs), model_->flat().params());
}

// H inner steps on this worker's batches of the round, then the pseudo-gradient's exchange from the
// round's start (worker/local_steps.h). The record's loss is the inner steps' mean.
absl::StatusOr<nlohmann::json> Trainer::RunLocalRound(std::uint64_t round) {
  const absl::Time start = absl::Now();
  FlatModel& flat = model_->flat();
  SKETCHPS_RETURN_IF_ERROR(local_->Begin(flat.params()));
  double loss_sum = 0;
  for (std::uint64_t h = 0; h < plan().local_steps; ++h) {
    SKETCHPS_ASSIGN_OR_RETURN(Batch batch, BatchOf(round, h));
    SKETCHPS_ASSIGN_OR_RETURN(const float loss, model_->ForwardBackward(batch.input, batch.target));
    SKETCHPS_RETURN_IF_ERROR(local_->Step(flat.grads(), flat.params(), round, h, plan().EpochOf(round, h)));
    loss_sum += loss;
  }
  SKETCHPS_ASSIGN_OR_RETURN(const float* delta, local_->Finish(flat.params()));
  const auto mean_loss = static_cast<float>(loss_sum / static_cast<double>(plan().local_steps));
  return session_->Step(round, mean_loss, delta, flat.params(), absl::Now() - start);
}

absl::Status Trainer::Evaluate(std::uint64_t round, bool final, nlohmann::json& record) {
  const absl::Time start = absl::Now();
  const std::uint64_t samples = final ? 0 : o_.job.train.eval_samples;
  const auto [index, count] = session_->EvalShare();  // this worker's share among the round's members
  SKETCHPS_ASSIGN_OR_RETURN(EvalCounts mine, EvaluateShare(*model_, test_, samples, index, count));
  SKETCHPS_RETURN_IF_ERROR(session::CheckEvaluationShare(round, mine.correct, mine.samples, mine.loss_sum));
  SKETCHPS_ASSIGN_OR_RETURN(auto sums, session_->SumOverWorkers(round, mine.ToVector()));
  const EvalCounts all = EvalCounts::FromVector(sums);
  SKETCHPS_RETURN_IF_ERROR(session::AddEvaluation(record, round, all.correct, all.samples, all.loss_sum,
                                                  absl::ToDoubleSeconds(absl::Now() - start), final));
  if (final) summary_.final_test_accuracy = all.correct / all.samples;
  spdlog::info("round {} test accuracy {:.4f} (loss {:.4f}, {} images{})", round + 1, all.correct / all.samples,
               all.loss_sum / all.samples, static_cast<std::uint64_t>(all.samples), final ? ", final" : "");
  return absl::OkStatus();
}

absl::Status Trainer::DumpGradient(std::uint64_t round) const {
  const auto& flat = model_->flat();
  GradientDump dump{o_.job.job_id,
                    o_.job.model,
                    plan().rank,
                    plan().workers,
                    round,
                    flat.layers(),
                    std::vector<float>(flat.grads(), flat.grads() + flat.dim())};
  std::error_code ec;
  std::filesystem::create_directories(o_.dump_dir, ec);
  const std::string path = (std::filesystem::path(o_.dump_dir) / GradientDumpName(round, plan().rank)).string();
  SKETCHPS_RETURN_IF_ERROR(WriteGradientDump(path, dump));
  spdlog::info("round {}: gradient written to {}", round, path);
  return absl::OkStatus();
}

// A worker whose gradient is not finite sits the round out (engine/scheme.h): never silently.
void Trainer::NoteSkipped(std::uint64_t round, const nlohmann::json& record) {
  if (!summary_.skipped.Note(round, record.value("skipped", false))) return;
  spdlog::warn("round {}: this worker's gradient is not finite (loss {}): it sent nothing this round ({})", round,
               record.value("loss", std::numeric_limits<double>::quiet_NaN()), summary_.skipped.Describe());
}

absl::StatusOr<TrainSummary> Trainer::Run() {
  spdlog::info("worker {}/{}: {} ({} parameters), scheme {}, rounds {}..{}{}", o_.rank, o_.job.workers, o_.job.model,
               model_->flat().dim(), o_.job.scheme.name, start_round_, plan().last_round,
               local_ != nullptr ? absl::StrCat(", ", plan().local_steps, " local steps per round")
               : o_.overlap      ? ", shards start as their gradients complete"
                                 : "");
  if (start_round_ >= plan().last_round) {
    spdlog::warn("the shards already hold round {} of {}: nothing left to train (a finished job's checkpoints?)",
                 start_round_, plan().last_round);
  }
  summary_.first_round = start_round_;
  summary_.weights_checksum = WeightsChecksum({model_->flat().params(), model_->flat().dim()});
  std::uint64_t round = start_round_;
  while (round < plan().last_round) {
    if (TerminationRequested()) StopBefore(round);
    session_->RememberRoundStart(round, model_->flat().params());
    const bool last = round + 1 == plan().last_round;
    // An elastic worker leaving before the job's end evaluates on the job's schedule only: its last
    // round is not the job's, so it takes no final evaluation (the others would not join it).
    const bool leaving = last && o_.leave_at_round > 0 && round + 1 < o_.job.total_rounds();
    const std::uint64_t every = o_.job.train.eval_every_rounds;
    // Left behind by a round deadline: take the rounds the shards already closed, uncomputed (the
    // evaluation rounds included, so every worker evaluates at the same weights).
    auto record = session_->Behind(round) ? session_->CatchUp(round, model_->flat().params()) : RunRound(round);
    if (record.ok() && ((last && !leaving) || (every > 0 && (round + 1) % every == 0))) {
      if (auto st = Evaluate(round, last && !leaving, *record); !st.ok()) record = st;
    }
    if (!record.ok()) {
      nlohmann::json note;
      SKETCHPS_ASSIGN_OR_RETURN(const Regrouped g,
                                session_->Recover(record.status(), round, model_->flat().params(), &note));
      regroup_note_ = std::move(note);
      round = g.round;
      continue;
    }
    if (regroup_note_) (*record)["regroup"] = *std::exchange(regroup_note_, std::nullopt);
    if (o_.log_every_rounds > 0 && (round % o_.log_every_rounds == 0 || last)) {
      spdlog::info("round {}/{} loss {:.4f}", round + 1, plan().last_round,
                   record->value("loss", std::numeric_limits<double>::quiet_NaN()));
    }
    NoteSkipped(round, *record);
    SKETCHPS_RETURN_IF_ERROR(log_.Append(*record));
    if (o_.metrics) o_.metrics->ObserveRound(*record);
    ++summary_.rounds;
    ++round;
  }
  if (auto st = session_->Finish(round); !st.ok()) {
    spdlog::warn("could not tell every shard this worker has finished: {}", std::string(st.message()));
  }
  const auto& p = model_->flat();
  summary_.weights_checksum = WeightsChecksum({p.params(), p.dim()});
  summary_.final_workers = plan().workers;
  summary_.final_weights.assign(p.params(), p.params() + p.dim());
  return summary_;
}

}  // namespace

absl::StatusOr<TrainSummary> Train(const TrainerOptions& options) {
  Trainer trainer(options);
  SKETCHPS_RETURN_IF_ERROR(trainer.Prepare());
  auto summary = trainer.Run();
  if (summary.ok() || trainer.skipped().count() == 0) return summary;
  return Annotate(summary.status(), absl::StrCat("with ", trainer.skipped().Describe()));
}

}  // namespace sketchps::worker
