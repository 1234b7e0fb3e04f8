#include "tools/preflight.h"

#include "absl/strings/str_cat.h"
#include "common/layout.h"
#include "common/status.h"
#include "engine/replica.h"
#include "session/round_plan.h"

namespace sketchps::tools {
namespace {

absl::Status Prefixed(const absl::Status& status, const std::string& key) {
  if (status.ok()) return status;
  return Annotate(status, key);
}

}  // namespace

absl::StatusOr<worker::DatasetSizes> CheckJobRunnable(const JobSpec& job, std::vector<std::string>* advisories,
                                                      bool script_workers) {
  if (!script_workers && job.optimizer.kind == OptimizerKind::kExternal) {
    return absl::InvalidArgumentError(
        "optimizer.name: external is for workers that run a torch optimizer (the Python package, sketchps run "
        "--script); sketchps-worker applies the replicated optimizer: choose sgd, adam or adamw");
  }
  auto shards = MakeShardMap(job.layout, job.servers);
  SKETCHPS_RETURN_IF_ERROR(
      Prefixed(shards.status(), absl::StrCat("servers (", job.servers, " shards of model ", job.model, ")")));
  SKETCHPS_RETURN_IF_ERROR(session::RoundPlan::Initial(job, 0).status());
  ReplicaOptions replica{0,
                         job.workers,
                         *shards,
                         job.layout,
                         job.scheme.make,
                         job.scheme.density,
                         job.scheme.global_momentum,
                         job.replicated_optimizer(),
                         job.train.seed,
                         /*parallel_shards=*/false};
  const std::string scheme = absl::StrCat("scheme (", job.scheme.name, " on ", job.model, ")");
  auto built = Replica::Create(replica);
  SKETCHPS_RETURN_IF_ERROR(Prefixed(built.status(), scheme));
  SKETCHPS_RETURN_IF_ERROR(Prefixed((*built)->WireStatus(), scheme));
  if (advisories != nullptr) {
    for (const std::string& a : (*built)->Advisories())
      advisories->push_back(absl::StrCat("scheme.", job.scheme.name, ", ", a));
  }
  if (advisories != nullptr && job.train.keep_inner_state &&
      job.train.outer.kind == OuterOptimizerSpec::Kind::kNesterov && job.train.outer.momentum > 0) {
    advisories->push_back(
        absl::StrCat("train.inner_state: keep with train.outer_optimizer nesterov (momentum ", job.train.outer.momentum,
                     "): the kept inner momentum and the outer one compound; measured to fail (ViT 54%, VGG diverged, "
                     "docs/reports/local-steps.md): keep goes with {name: average}"));
  }
  if (script_workers) return worker::DatasetSizes{job.data.train_samples, 0};  // the script reads its own data
  return worker::CheckFashionMnist(job);
}

}  // namespace sketchps::tools
