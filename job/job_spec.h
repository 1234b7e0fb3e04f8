// The job spec: one YAML document that configures servers, workers and `sketchps run` alike.
//
//   job_id: fmnist-gs-sgd
//   mode: ps                      # ps | decentralized
//   workers: 4
//   servers: 2
//   model: cnn                    # mlp | cnn | resnet | vgg | custom (a Python model, docs/pytorch.md)
//   layers: [["fc.weight", [10, 784]], ...]   # model: custom only: its layout (job/model_layout.h)
//   data: {path: /usr/share/datasets/fashion-mnist, batch_size: 32, train_samples: 60000}
//   train: {epochs: 1, rounds: 0, eval_every_rounds: 200, eval_samples: 0, seed: 1,
//           local_steps: 1, outer_optimizer: {name: average}, inner_state: reset}   # local steps: below
//   optimizer: {name: sgd, lr: 0.05, momentum: 0.9, nesterov: false, weight_decay: 0, no_decay: [],
//               schedule: constant, warmup: 0, warmup_start_factor: 1,
//               milestones: [], gamma: 0.1, min_lr: 0}
//              # name: adam | adamw instead take betas: [0.9, 0.999], eps: 1e-8 and optionally
//              # freeze_variance: <span> (the second moment is held after it); no_decay lists the
//              # parameters (layer names) without weight decay; the cosine schedule ends with the job
//   scheme: {name: topk, density: 0.01, dense_warmup: 0, diagnostics: false, topk: {...}}
//   checkpoint: {dir: "", every_rounds: 100, on_damaged: refuse}   # a restarted shard recovers later
//              # rounds from the workers; on_damaged: older skips a damaged checkpoint for an older one
//   peer: {timeout_seconds: 60, on_failure: regroup}   # decentralized mode; on_failure: regroup | stop
//   ps: {round_deadline_seconds: 0}   # ps mode; > 0: rounds close without stragglers (below)
//
// Every key is optional (defaults above; DefaultJobSpecYaml() is the embedded default job).
// Warm-ups and other schedules are spans: "200 rounds", "2 epochs", "10%" of the job, or a list of
// them meaning the shortest (common/config/job_span.h); the round-1 keys optimizer.warmup_epochs and
// scheme.warmup_rounds are still read.
// Unknown keys and invalid values are errors naming the key. Overrides ("scheme.name=topk") are
// applied to the YAML before it is read, so flags and files share one validation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/job_span.h"
#include "common/layout.h"
#include "common/wire/fingerprint.h"
#include "engine/optimizer.h"
#include "schemes/registry.h"

namespace sketchps {

struct DataSpec {
  std::string path = "/usr/share/datasets/fashion-mnist";
  std::uint32_t batch_size = 32;  // per worker
  std::uint64_t train_samples = 60000;
  bool train_samples_set = false;  // the spec sets train_samples (else the default above)
};

// Evaluation: every rank evaluates its share of the test set (a contiguous 1/P block) between rounds
// and the counts are summed over the workers, so every rank knows the exact accuracy. Intermediate
// points (every eval_every_rounds rounds; 0: none) use the first eval_samples test images (0: all of
// them); the evaluation after the last round always uses the whole test set.
//
// Local steps (docs/methods.md "Local steps", DiLoCo's recipe): with local_steps H, a round is H
// steps of the job's optimizer on each worker's own batches (the inner optimizer, local to the
// worker, its state reset at each round's start, or with inner_state: keep carried across rounds and
// saved in the worker's state files, as DiLoCo does); the worker then exchanges the pseudo-gradient
// (the weights at the round's start minus its weights now) through the scheme as it would a
// gradient, and every replica applies the aggregate with the outer optimizer to the round-start
// weights. The outer optimizer is the replicated one (servers' master copies, checkpoints).
// H = 1 with `average` (the defaults) is the job without local steps, bit for bit.
struct OuterOptimizerSpec {
  enum class Kind { kAverage, kNesterov };
  Kind kind = Kind::kAverage;
  double lr = 1.0;        // average: 1 (new = start - mean pseudo-gradient); nesterov: 0.7
  double momentum = 0.0;  // average: 0; nesterov: 0.9
};

struct TrainSpec {
  double epochs = 1.0;
  std::uint64_t rounds = 0;  // 0: derived from epochs
  std::uint64_t eval_every_rounds = 200;
  std::uint64_t eval_samples = 0;
  std::uint64_t seed = 1;
  std::uint64_t local_steps = 1;  // H >= 1: inner steps per round
  OuterOptimizerSpec outer;
  // train.inner_state: reset (false, the default) zeroes the inner optimizer's state at every round's
  // start; keep (true) carries it across rounds. Needs local steps.
  bool keep_inner_state = false;
};

struct CheckpointSpec {
  std::string dir;  // empty: no checkpoints
  std::uint64_t every_rounds = 100;
  // on_damaged: a checkpoint (or worker state file) that fails its framing or CRC is refused, naming
  // the file (refuse, false), or skipped for the newest intact older one (older, true).
  bool older_if_damaged = false;
};

// Decentralized mode: a peer silent for timeout_seconds is declared dead; the survivors then either
// regroup and go on with P - 1 workers from the next round boundary, or stop with an error.
enum class OnPeerFailure { kRegroup, kStop };
struct PeerSpec {
  double timeout_seconds = 60;
  OnPeerFailure on_failure = OnPeerFailure::kRegroup;
};

// Parameter-server mode: with round_deadline_seconds > 0 a shard closes each phase of a round that
// long after its first push, without the workers that have not pushed yet, once at least half of them
// have (engine/phase_table.h "Round deadline"). The late workers keep their gradient for the next
// round (Scheme::FinishExcluded). 0: every round waits for every worker (deterministic).
struct PsSpec {
  double round_deadline_seconds = 0;
  // Elastic membership (docs/reliability.md "Elastic workers"): `workers` is the number of slots;
  // slots [0, initial_workers) start the job, the others may join it later, and any may leave.
  bool elastic = false;
  std::uint32_t initial_workers = 0;  // 0: all `workers` (the key is only read with elastic)
};

// ps: S parameter-server shards aggregate; decentralized: the workers' peer collectives.
enum class Mode { kPs, kDecentralized };
// "ps" / "decentralized".
const char* ModeName(Mode mode);

struct JobSpec {
  std::string job_id = "sketchps";
  Mode mode = Mode::kPs;
  std::uint32_t workers = 4;
  std::uint32_t servers = 2;
  std::string model = "cnn";
  DataSpec data;
  TrainSpec train;
  OptimizerConfig optimizer;
  BoundScheme scheme;
  CheckpointSpec checkpoint;
  PeerSpec peer;
  PsSpec ps;
  std::string effective_yaml;  // the spec after overrides, for logs and run directories
  LayerTable layout;           // the model's parameter layout (job/model_layout.h); empty for
                               // model: custom without layers
  Fingerprint fingerprint;     // JobFingerprint(*this), set by ParseJobSpec

  // Rounds per epoch: train_samples / (workers * batch_size * train.local_steps), at least 1.
  double rounds_per_epoch() const;
  // train.rounds, or ceil(epochs * rounds_per_epoch).
  std::uint64_t total_rounds() const;
  // Both of the above, to resolve spans (common/config/job_span.h).
  JobClock clock() const;
  bool decentralized() const { return mode == Mode::kDecentralized; }
  // Whether rounds exchange pseudo-gradients (train.local_steps > 1 or a nesterov outer optimizer).
  bool local_steps() const { return train.local_steps > 1 || train.outer.kind != OuterOptimizerSpec::Kind::kAverage; }
  // The optimizer every replica applies to a round's aggregate: `optimizer` without local steps, the
  // outer optimizer with them (SGD at a constant train.outer_optimizer.lr, momentum, Nesterov for
  // nesterov, no weight decay). With local steps `optimizer` is the workers' inner optimizer.
  OptimizerConfig replicated_optimizer() const;
};

// A hash per key whose value changes what a job computes: mode, workers, servers, model,
// data.batch_size, data.train_samples, train.epochs, train.rounds, train.seed, train.local_steps with
// train.outer_optimizer, optimizer, scheme
// (its section as written). Not job_id, paths, checkpoints, evaluation, peer timeouts or the round
// deadline (ps.round_deadline_seconds: the shards' business, not the workers').
Fingerprint JobFingerprint(const JobSpec& job, const YAML::Node& root);

// The embedded default job (top-k at density 0.01, CNN, Fashion-MNIST, 4 workers, 2 servers, one epoch).
const std::string& DefaultJobSpecYaml();

// Parses `yaml_text` (named `source` in errors) with `overrides` ("a.b=value") applied first.
absl::StatusOr<JobSpec> ParseJobSpec(const std::string& yaml_text, const std::string& source,
                                     const std::vector<std::string>& overrides = {});
// Reads the file at `path` (empty: the embedded default) and parses it.
absl::StatusOr<JobSpec> LoadJobSpec(const std::string& path, const std::vector<std::string>& overrides = {});

}  // namespace sketchps
