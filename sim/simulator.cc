#include "sim/simulator.h"

#include <cstdio>
#include <memory>
#include <numeric>

#include <ATen/Parallel.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status.h"
#include "common/version.h"
#include "engine/shard.h"
#include "kernels/backend.h"
#include "sim/batch_source.h"
#include "sim/cohort.h"
#include "sim/participation.h"
#include "sim/sim_record.h"
#include "worker/batch.h"
#include "worker/evaluate.h"
#include "worker/models.h"

namespace sketchps::sim {
namespace {

class Simulator {
 public:
  explicit Simulator(const SimOptions& o) : o_(o), seed_(o.seed.value_or(o.job.train.seed)) {}

  absl::Status Prepare();
  absl::StatusOr<nlohmann::json> Run(const RecordSink& sink);

 private:
  absl::StatusOr<nlohmann::json> RunRound(std::uint64_t round);
  absl::StatusOr<std::vector<float>> ComputeGradients(std::uint64_t round, const std::vector<std::uint32_t>& who);
  absl::StatusOr<Evaluation> Evaluate(bool final);
  nlohmann::json Config() const;
  void Progress(std::uint64_t round, const nlohmann::json& record) const;

  const SimOptions& o_;
  const std::uint64_t seed_;
  std::unique_ptr<worker::Model> model_;
  worker::Dataset train_, test_;
  std::unique_ptr<BatchSource> batches_;
  std::unique_ptr<Cohort> cohort_;
  session::RoundPlan plan_;  // the job's: fractional epochs
  std::uint32_t per_round_ = 0;
};

nlohmann::json Simulator::Config() const {
  const JobSpec& j = o_.job;
  return {{"scheme", j.scheme.name},
          {"density", j.scheme.density},
          {"model", j.model},
          {"dim", j.layout.dim()},
          {"workers", j.workers},
          {"servers", j.servers},
          {"batch_size", j.data.batch_size},
          {"partition", o_.partition.Name()},
          {"participation", o_.participation},
          {"participants_per_round", per_round_},
          {"rounds", j.total_rounds()},
          {"lr", j.optimizer.lr.base_lr},
          {"train_seed", j.train.seed},
          {"seed", seed_},
          {"version", Version()},
          {"effective_yaml", j.effective_yaml}};
}

absl::Status Simulator::Prepare() {
  SKETCHPS_RETURN_IF_ERROR(CheckParticipation(o_.participation));
  if (o_.job.decentralized()) return absl::InvalidArgumentError("mode: the simulator runs ps mode (the shards' hub)");
  at::set_num_threads(o_.torch_threads);
  SKETCHPS_ASSIGN_OR_RETURN(worker::Model model, worker::Model::Create(o_.job.model, o_.job.train.seed));
  model_ = std::make_unique<worker::Model>(std::move(model));
  SKETCHPS_ASSIGN_OR_RETURN(train_, worker::LoadFashionMnist(o_.job.data.path, worker::Split::kTrain));
  SKETCHPS_ASSIGN_OR_RETURN(test_, worker::LoadFashionMnist(o_.job.data.path, worker::Split::kTest));
  SKETCHPS_ASSIGN_OR_RETURN(batches_, BatchSource::Create(o_.job, o_.partition, train_.labels, seed_));
  SKETCHPS_ASSIGN_OR_RETURN(plan_, session::RoundPlan::Initial(o_.job, 0));
  per_round_ = ParticipantsPerRound(o_.job.workers, o_.participation);
  const auto& flat = model_->flat();
  std::vector<float> initial(flat.params(), flat.params() + flat.dim());
  SKETCHPS_ASSIGN_OR_RETURN(cohort_, Cohort::Create(o_.job, initial, per_round_));
  for (const auto& a : cohort_->Advisories())
    std::fprintf(stderr, "simulate: warning: scheme.%s, %s\n", o_.job.scheme.name.c_str(), a.c_str());
  return absl::OkStatus();
}

// Each participant's gradient into its slot, one after another with the one model; their losses.
absl::StatusOr<std::vector<float>> Simulator::ComputeGradients(std::uint64_t round,
                                                               const std::vector<std::uint32_t>& who) {
  std::vector<float> losses;
  auto& flat = model_->flat();
  for (std::size_t i = 0; i < who.size(); ++i) {
    SKETCHPS_ASSIGN_OR_RETURN(auto indices, batches_->Next(who[i], round));
    SKETCHPS_ASSIGN_OR_RETURN(worker::Batch batch, worker::MakeBatch(train_, indices));
    SKETCHPS_ASSIGN_OR_RETURN(const float loss, model_->ForwardBackward(batch.input, batch.target));
    kernels::CopyToDevice(cohort_->grad_slot(static_cast<std::uint32_t>(i)), flat.grads(), flat.dim() * sizeof(float));
    losses.push_back(loss);
  }
  return losses;
}

absl::StatusOr<Evaluation> Simulator::Evaluate(bool final) {
  const std::uint64_t samples = final ? 0 : o_.eval_samples.value_or(o_.job.train.eval_samples);
  const std::uint64_t n = samples == 0 ? test_.size() : std::min<std::uint64_t>(samples, test_.size());
  std::vector<std::uint64_t> indices(n);
  std::iota(indices.begin(), indices.end(), std::uint64_t{0});
  SKETCHPS_ASSIGN_OR_RETURN(worker::EvalResult r, worker::Evaluate(*model_, test_, indices));
  return Evaluation{r.accuracy, r.mean_loss, r.count, final};
}

absl::StatusOr<nlohmann::json> Simulator::RunRound(std::uint64_t round) {
  const absl::Time start = absl::Now();
  const std::vector<std::uint32_t> who = Participants(o_.job.workers, o_.participation, seed_, round);
  RoundFacts facts;
  facts.round = round;
  facts.epoch = plan_.EpochOf(round);
  SKETCHPS_ASSIGN_OR_RETURN(facts.losses, ComputeGradients(round, who));
  const absl::Time computed = absl::Now();
  SKETCHPS_ASSIGN_OR_RETURN(CohortRound c, cohort_->Run(RoundInfo{round, facts.epoch}, who));
  kernels::CopyToHost(model_->flat().params(), cohort_->weights(0), cohort_->dim() * sizeof(float));
  facts.dense_bytes = 4 * cohort_->dim();
  facts.compute_s = absl::ToDoubleSeconds(computed - start);
  facts.exchange_s = absl::ToDoubleSeconds(absl::Now() - computed);
  return RoundRecord(facts, c);
}

void Simulator::Progress(std::uint64_t round, const nlohmann::json& record) const {
  const bool last = round + 1 == plan_.last_round;
  if (o_.progress_every == 0 || (round % o_.progress_every != 0 && !last && !record.contains("test_accuracy"))) return;
  std::string line = absl::StrCat("simulate: ", o_.job.scheme.name, " round ", round + 1, "/", plan_.last_round);
  if (record["loss"].is_number()) absl::StrAppend(&line, " loss ", record["loss"].get<double>());
  if (record.contains("test_accuracy"))
    absl::StrAppend(&line, " test accuracy ", record["test_accuracy"].get<double>());
  absl::StrAppend(&line, " (", record["compute_s"].get<double>() + record["exchange_s"].get<double>(), " s)");
  std::fprintf(stderr, "%s\n", line.c_str());
}

absl::StatusOr<nlohmann::json> Simulator::Run(const RecordSink& sink) {
  const absl::Time start = absl::Now();
  SummaryBuilder summary(Config());
  const std::uint64_t every = o_.eval_every.value_or(o_.job.train.eval_every_rounds);
  for (std::uint64_t round = 0; round < plan_.last_round; ++round) {
    SKETCHPS_ASSIGN_OR_RETURN(nlohmann::json record, RunRound(round));
    const bool last = round + 1 == plan_.last_round;
    if (last || (every > 0 && (round + 1) % every == 0)) {
      SKETCHPS_ASSIGN_OR_RETURN(const Evaluation e, Evaluate(last));
      AddEvaluation(e, record);
    }
    Progress(round, record);
    summary.Add(record);
    if (sink) sink(record);
  }
  return summary.Finish(absl::ToDoubleSeconds(absl::Now() - start));
}

}  // namespace

absl::StatusOr<nlohmann::json> Simulate(const SimOptions& options, const RecordSink& sink) {
  Simulator sim(options);
  SKETCHPS_RETURN_IF_ERROR(sim.Prepare());
  return sim.Run(sink);
}

}  // namespace sketchps::sim
