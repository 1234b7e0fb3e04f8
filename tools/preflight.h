// What `sketchps run` checks before it starts any process, so that a job that cannot run fails at
// once (exit 2) with the key named, instead of after servers and workers have started:
//   - the job spec itself: every key, the model name, the scheme (LoadJobSpec, job/job_spec.h);
//   - the model's layers split into `servers` shards (common/layout.h MakeShardMap);
//   - the data plan: data.train_samples holds at least one global batch (session/round_plan.h);
//   - every shard's scheme and optimizer can be built for this model, as each worker builds them
//     (engine/replica.h);
//   - the data set: the files exist, their headers agree and hold data.train_samples
//     (worker/idx_file.h); not for script workers (sketchps run --script), which read their own;
//   - optimizer.name external only for script workers.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "job/job_spec.h"
#include "worker/idx_file.h"

namespace sketchps::tools {

// The data set's sizes when the job can run; else the first problem (InvalidArgument or NotFound),
// its message starting with the key. Warnings that do not stop the job (Scheme::advisory, each
// starting with "scheme.<name>"; train.inner_state keep with a Nesterov outer step, which was
// measured to fail) go to *advisories when given. `script_workers`: the workers are a
// Python script (sketchps run --script).
absl::StatusOr<worker::DatasetSizes> CheckJobRunnable(const JobSpec& job,
                                                      std::vector<std::string>* advisories = nullptr,
                                                      bool script_workers = false);

}  // namespace sketchps::tools
