// The free functions of sketchps/python_core.h: the job spec, the environment helpers, the data order,
// Fashion-MNIST, the checkpoints and the kernels, each the C++ worker's own.
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/cli.h"
#include "common/wire/file_key.h"
#include "engine/optimizer.h"
#include "engine/shard.h"
#include "job/job_spec.h"
#include "job/model_layout.h"
#include "kernels/backend.h"
#include "ps/export.h"
#include "python/src/errors.h"
#include "sketchps/python_core.h"
#include "worker/fashion_mnist.h"

namespace sketchps::pycore {
namespace {

Layout LayoutOf(const LayerTable& table) {
  Layout out;
  for (const auto& l : table.layers) out.emplace_back(l.name, l.shape);
  return out;
}

std::vector<std::pair<std::string, std::string>> ScheduleSettings(const LrSchedule& lr) {
  std::vector<std::pair<std::string, std::string>> out;
  if (lr.kind != LrSchedule::Kind::kConstant) {
    out.emplace_back("schedule", lr.kind == LrSchedule::Kind::kStep ? "step" : "cosine");
  }
  if (lr.warmup_epochs > 0) out.emplace_back("warmup", absl::StrCat(lr.warmup_epochs, " epochs"));
  if (!lr.milestones.empty())
    out.emplace_back("milestones", absl::StrCat("[", absl::StrJoin(lr.milestones, ", "), "]"));
  if (lr.min_lr != 0) out.emplace_back("min_lr", absl::StrCat(lr.min_lr));
  return out;
}

Job JobOf(JobSpec spec) {
  Job j;
  j.job_id = spec.job_id;
  j.mode = ModeName(spec.mode);
  j.model = spec.model;
  j.data_path = spec.data.path;
  j.scheme = spec.scheme.name;
  j.optimizer = OptimizerName(spec.optimizer.kind);
  j.effective_yaml = spec.effective_yaml;
  j.workers = spec.workers;
  j.servers = spec.servers;
  j.batch_size = spec.data.batch_size;
  j.train_samples = spec.data.train_samples;
  j.seed = spec.train.seed;
  j.eval_every_rounds = spec.train.eval_every_rounds;
  j.eval_samples = spec.train.eval_samples;
  j.total_rounds = spec.total_rounds();
  j.rounds_per_epoch = spec.rounds_per_epoch();
  j.checkpoint_every = spec.checkpoint.every_rounds;
  j.checkpoint_dir = spec.checkpoint.dir;
  j.density = spec.scheme.density;
  j.lr = spec.optimizer.lr.base_lr;
  j.momentum = spec.optimizer.momentum;
  j.nesterov = spec.optimizer.nesterov;
  j.weight_decay = spec.optimizer.weight_decay;
  j.beta1 = spec.optimizer.beta1;
  j.beta2 = spec.optimizer.beta2;
  j.eps = spec.optimizer.eps;
  j.no_decay = spec.optimizer.no_decay;
  j.local_steps = spec.train.local_steps;
  j.outer_optimizer = spec.train.outer.kind == OuterOptimizerSpec::Kind::kNesterov ? "nesterov" : "average";
  j.outer_lr = spec.train.outer.lr;
  j.outer_momentum = spec.train.outer.momentum;
  j.has_local_steps = spec.local_steps();
  j.layout = LayoutOf(spec.layout);
  j.train_samples_set = spec.data.train_samples_set;
  j.peer_on_failure = spec.peer.on_failure == OnPeerFailure::kRegroup ? "regroup" : "stop";
  j.schedule_settings = ScheduleSettings(spec.optimizer.lr);
  j.spec = std::make_shared<const JobSpec>(std::move(spec));
  return j;
}

const JobSpec& SpecOf(const Job& job) {
  if (job.spec == nullptr) throw Error(ErrorKind::kConfig, "job: not made by load_job");
  return *job.spec;
}

}  // namespace

Job LoadJob(const std::string& path, const std::vector<std::string>& overrides) {
  return JobOf(Unwrap(LoadJobSpec(path, overrides)));
}

std::string LayoutText(const Layout& layout) { return sketchps::LayoutText(MakeLayerTable(layout)); }

std::optional<std::uint32_t> EnvUint32(const std::string& name) { return Unwrap(sketchps::EnvUint32(name.c_str())); }

double LearningRate(const Job& job, std::uint64_t round) {
  const JobSpec& spec = SpecOf(job);
  return sketchps::LearningRate(spec.optimizer.lr, EpochOfRound(round, spec.rounds_per_epoch()));
}

std::vector<std::uint64_t> GlobalBatch(const Job& job, std::uint64_t round) {
  // The union of every worker's batch of `round`, in rank order: one process with batch P*b sees
  // exactly these samples (the data order rule of worker/fashion_mnist.h).
  const JobSpec& spec = SpecOf(job);
  const std::uint64_t global = std::uint64_t{spec.workers} * spec.data.batch_size;
  const std::uint64_t steps = worker::StepsPerEpoch(spec.data.train_samples, 1, global);
  if (steps == 0) Throw(absl::InvalidArgumentError("data.train_samples: fewer than one global batch"));
  const auto perm = worker::EpochPermutation(spec.data.train_samples, spec.train.seed, round / steps);
  const auto span = Unwrap(worker::StepIndices(perm, round % steps, 0, 1, global));
  return {span.begin(), span.end()};
}

std::vector<std::uint64_t> Shard(std::uint64_t n, std::uint32_t rank, std::uint32_t world) {
  return Unwrap(worker::Shard(n, rank, world));
}

FashionMnistSet FashionMnist(const std::string& dir, const std::string& split) {
  if (split != "train" && split != "test") {
    Throw(absl::InvalidArgumentError("split: '" + split + "' is not train or test"));
  }
  const auto data =
      Unwrap(worker::LoadFashionMnist(dir, split == "train" ? worker::Split::kTrain : worker::Split::kTest));
  std::vector<std::uint64_t> all(data.size());
  std::iota(all.begin(), all.end(), std::uint64_t{0});
  FashionMnistSet out;
  out.count = data.size();
  out.images.resize(data.size() * worker::Dataset::kPixels);
  out.labels.resize(data.size());
  Check(worker::FillBatch(data, all, out.images.data(), out.labels.data()));
  return out;
}

CheckpointedWeights LoadCheckpoints(const std::string& dir, const std::string& job_id, std::uint32_t shards,
                                    const std::string& key_file) {
  std::optional<FileKey> key;
  if (!key_file.empty()) key = Unwrap(FileKey::Load(key_file));
  auto model = Unwrap(ps::LoadCheckpointedModel(dir, job_id, shards, key ? &*key : nullptr));
  return {model.rounds_applied, LayoutOf(model.layers), std::move(model.weights)};
}

std::string KernelsBackend() { return kernels::BackendName(); }
std::string KernelsDescription() { return kernels::BackendDescription(); }
void CheckKernels() {
  // Not FailedPrecondition's OrderError: which kernels a process loads is its configuration.
  const absl::Status st = kernels::CheckBackend();
  if (!st.ok()) throw Error(ErrorKind::kConfig, std::string(st.message()));
}

}  // namespace sketchps::pycore
