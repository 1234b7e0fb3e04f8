#include "job/job_spec.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/config/config_reader.h"
#include "common/status.h"
#include "job/default_job.h"  // generated from job/default_job.yaml
#include "job/model_layout.h"

namespace sketchps {
namespace {

// No job runs 10^12 rounds; the bound keeps every rounds computation (spans, schedules) in range.
constexpr std::uint64_t kMaxJobRounds = 1000000000000;

absl::Status ApplyOverride(YAML::Node& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(absl::StrCat("override '", assignment, "': expected key.path=value"));
  }
  const std::vector<std::string> keys = absl::StrSplit(assignment.substr(0, eq), '.');
  std::vector<YAML::Node> chain = {root};
  for (std::size_t i = 0; i + 1 < keys.size(); ++i) {
    YAML::Node next = chain.back()[keys[i]];
    if (next && !next.IsMap() && !next.IsNull()) {
      return absl::InvalidArgumentError(absl::StrCat("override '", assignment, "': '", keys[i], "' is not a mapping"));
    }
    chain.push_back(next);
  }
  try {
    chain.back()[keys.back()] = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("override '", assignment, "': ", e.what()));
  }
  return absl::OkStatus();
}

// optimizer.warmup (a span, resolved here: the replicated optimizers all see epochs) or the round-1 key
// optimizer.warmup_epochs; not both.
absl::Status ReadLrWarmup(ConfigReader& r, const JobClock& clock, LrSchedule& s) {
  JobSpan span;
  SKETCHPS_ASSIGN_OR_RETURN(const auto legacy,
                            ReadSpanOrLegacy(r, "warmup", "warmup_epochs", JobSpan::Unit::kEpochs, span));
  if (legacy.has_value()) {
    s.warmup_epochs = *legacy;  // as given, not through rounds
  } else if (r.Has("warmup")) {
    s.warmup_epochs = span.Rounds(clock) / clock.rounds_per_epoch;
  }
  return absl::OkStatus();
}

absl::Status ReadSchedule(ConfigReader& r, const JobClock& clock, LrSchedule& s) {
  std::string kind = "constant";
  SKETCHPS_RETURN_IF_ERROR(r.Get("schedule", kind));
  if (kind == "constant")
    s.kind = LrSchedule::Kind::kConstant;
  else if (kind == "step")
    s.kind = LrSchedule::Kind::kStep;
  else if (kind == "cosine")
    s.kind = LrSchedule::Kind::kCosine;
  else
    return absl::InvalidArgumentError(
        absl::StrCat(r.KeyPath("schedule"), ": '", kind, "' is not constant, step or cosine"));
  SKETCHPS_RETURN_IF_ERROR(r.Get("lr", s.base_lr));
  SKETCHPS_RETURN_IF_ERROR(ReadLrWarmup(r, clock, s));
  SKETCHPS_RETURN_IF_ERROR(r.Get("warmup_start_factor", s.warmup_start_factor));
  SKETCHPS_RETURN_IF_ERROR(r.Get("milestones", s.milestones));
  SKETCHPS_RETURN_IF_ERROR(r.Get("gamma", s.gamma));
  SKETCHPS_RETURN_IF_ERROR(r.Get("min_lr", s.min_lr));
  // Keys of another schedule, or of a warm-up that is not there, would change nothing: refused.
  for (const char* key : {"milestones", "gamma"}) {
    if (kind != "step" && r.Has(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat(r.KeyPath(key), ": only with optimizer.schedule: step (the schedule is ", kind, ")"));
    }
  }
  if (kind != "cosine" && r.Has("min_lr")) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.KeyPath("min_lr"), ": only with optimizer.schedule: cosine (the schedule is ", kind, ")"));
  }
  if (r.Has("warmup_start_factor") && s.warmup_epochs == 0 && s.warmup_start_factor != 1) {
    return absl::InvalidArgumentError(absl::StrCat(r.KeyPath("warmup_start_factor"),
                                                   ": needs a warm-up (optimizer.warmup) for its ramp to start from"));
  }
  return absl::OkStatus();
}

// optimizer.name and the keys of that optimizer; the other optimizer's keys are errors.
absl::Status ReadOptimizerKind(ConfigReader& r, OptimizerConfig& o) {
  std::string name = "sgd";
  SKETCHPS_RETURN_IF_ERROR(r.Get("name", name));
  if (name == "sgd") {
    o.kind = OptimizerKind::kSgd;
  } else if (name == "adam") {
    o.kind = OptimizerKind::kAdam;
  } else if (name == "adamw") {
    o.kind = OptimizerKind::kAdamW;
  } else if (name == "external") {
    o.kind = OptimizerKind::kExternal;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(r.KeyPath("name"), ": '", name, "' is not sgd, adam, adamw or external"));
  }
  if (o.kind == OptimizerKind::kExternal) {
    for (const char* key : {"momentum", "nesterov", "betas", "eps", "freeze_variance"}) {
      if (r.Has(key)) {
        return absl::InvalidArgumentError(
            absl::StrCat(r.KeyPath(key), ": not a key of external (the torch optimizer holds its settings)"));
      }
    }
    return absl::OkStatus();
  }
  const bool sgd = o.kind == OptimizerKind::kSgd;
  for (const char* key : sgd ? std::vector<const char*>{"betas", "eps", "freeze_variance"}
                             : std::vector<const char*>{"momentum", "nesterov"}) {
    if (r.Has(key)) return absl::InvalidArgumentError(absl::StrCat(r.KeyPath(key), ": not a key of ", name));
  }
  if (sgd) return r.GetAll("momentum", o.momentum, "nesterov", o.nesterov);
  std::vector<double> betas{o.beta1, o.beta2};
  SKETCHPS_RETURN_IF_ERROR(r.Get("betas", betas));
  if (betas.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.KeyPath("betas"), ": expected two numbers [beta1, beta2], got ", betas.size()));
  }
  o.beta1 = betas[0];
  o.beta2 = betas[1];
  return r.Get("eps", o.eps);
}

// optimizer.freeze_variance: a span after which Adam's second moment is held (none by default).
absl::Status ReadFreezeVariance(ConfigReader& r, const JobClock& clock, OptimizerConfig& o) {
  if (!r.Has("freeze_variance")) return absl::OkStatus();
  JobSpan span;
  SKETCHPS_RETURN_IF_ERROR(r.Get("freeze_variance", span));
  o.freeze_variance_round = static_cast<std::uint64_t>(std::ceil(span.Rounds(clock)));
  return absl::OkStatus();
}

// optimizer.no_decay names parameters of the model (when its layout is known).
absl::Status CheckNoDecay(const JobSpec& job) {
  if (job.layout.layers.empty()) return absl::OkStatus();
  for (const std::string& name : job.optimizer.no_decay) {
    const bool known =
        std::any_of(job.layout.layers.begin(), job.layout.layers.end(), [&](const Layer& l) { return l.name == name; });
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer.no_decay: '", name, "' is not a parameter of model ",
                                                     job.model, " (", job.layout.layers.size(), " parameters, e.g. '",
                                                     job.layout.layers.front().name, "')"));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadOptimizer(ConfigReader& root, JobSpec& job) {
  SKETCHPS_ASSIGN_OR_RETURN(ConfigReader r, root.Child("optimizer"));
  OptimizerConfig& o = job.optimizer;
  o.lr.base_lr = 0.05;
  SKETCHPS_RETURN_IF_ERROR(ReadOptimizerKind(r, o));
  SKETCHPS_RETURN_IF_ERROR(ReadSchedule(r, job.clock(), o.lr));
  SKETCHPS_RETURN_IF_ERROR(r.GetAll("weight_decay", o.weight_decay, "no_decay", o.no_decay));
  SKETCHPS_RETURN_IF_ERROR(ReadFreezeVariance(r, job.clock(), o));
  SKETCHPS_RETURN_IF_ERROR(r.Finish());
  // The cosine schedule ends with the job, however its length is given (epochs or rounds).
  o.lr.total_epochs = static_cast<double>(job.total_rounds()) / job.rounds_per_epoch();
  return ValidateOptimizerConfig(o, "optimizer");
}

// train.outer_optimizer: {name: average} (lr 1, momentum 0, no other key) or {name: nesterov, lr,
// momentum} with DiLoCo's defaults (0.7, 0.9).
absl::Status ReadOuterOptimizer(ConfigReader& train, OuterOptimizerSpec& o) {
  SKETCHPS_ASSIGN_OR_RETURN(ConfigReader r, train.Child("outer_optimizer"));
  std::string name = "average";
  SKETCHPS_RETURN_IF_ERROR(r.Get("name", name));
  if (name == "nesterov") {
    o = OuterOptimizerSpec{OuterOptimizerSpec::Kind::kNesterov, 0.7, 0.9};
  } else if (name != "average") {
    return absl::InvalidArgumentError(absl::StrCat(r.KeyPath("name"), ": '", name, "' is not average or nesterov"));
  } else {
    for (const char* key : {"lr", "momentum"}) {
      if (r.Has(key)) {
        return absl::InvalidArgumentError(
            absl::StrCat(r.KeyPath(key),
                         ": not a key of average (lr 1, momentum 0: the new weights are the round's start minus "
                         "the mean pseudo-gradient); use name: nesterov"));
      }
    }
  }
  SKETCHPS_RETURN_IF_ERROR(r.GetAll("lr", o.lr, "momentum", o.momentum));
  SKETCHPS_RETURN_IF_ERROR(r.Finish());
  if (!(o.lr > 0) || o.lr > 100) {
    return absl::InvalidArgumentError(absl::StrCat(r.KeyPath("lr"), ": must be in (0, 100], got ", o.lr));
  }
  if (!(o.momentum >= 0) || !(o.momentum < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(r.KeyPath("momentum"), ": must be in [0, 1), got ", o.momentum));
  }
  return absl::OkStatus();
}

// Local steps run the job's optimizer on each worker, its state reset every round unless
// train.inner_state: keep (which needs local steps): what needs the whole job's step count is refused,
// naming the key. With optimizer.name external the inner steps are
// a torch optimizer's (the Python package's DistributedOptimizer; sketchps-worker refuses external
// jobs, and the DDP comm hook refuses local steps) and the replicas apply the outer optimizer.
absl::Status CheckLocalSteps(const JobSpec& job) {
  if (job.train.keep_inner_state && !job.local_steps()) {
    return absl::InvalidArgumentError(
        "train.inner_state: keep needs local steps (train.local_steps > 1 or train.outer_optimizer.name: nesterov)");
  }
  if (!job.local_steps()) return absl::OkStatus();
  const auto& o = job.optimizer;
  if (o.freeze_variance_round) {
    return absl::InvalidArgumentError(
        "optimizer.freeze_variance: not with train.local_steps (the inner optimizer's state starts afresh every "
        "round)");
  }
  if (!job.scheme.global_momentum && job.train.outer.momentum > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("train.outer_optimizer.momentum: scheme ", job.scheme.name,
                     " keeps its own momentum of the pseudo-gradients, so the outer momentum would not be applied: use "
                     "train.outer_optimizer.momentum: 0 (or name: average)"));
  }
  return absl::OkStatus();
}

absl::Status ReadSections(ConfigReader& root, JobSpec& job) {
  SKETCHPS_ASSIGN_OR_RETURN(ConfigReader data, root.Child("data"));
  job.data.train_samples_set = data.Has("train_samples");
  SKETCHPS_RETURN_IF_ERROR(
      data.GetAll("path", job.data.path, "batch_size", job.data.batch_size, "train_samples", job.data.train_samples));
  SKETCHPS_RETURN_IF_ERROR(data.Finish());
  SKETCHPS_ASSIGN_OR_RETURN(ConfigReader train, root.Child("train"));
  SKETCHPS_RETURN_IF_ERROR(train.GetAll("epochs", job.train.epochs, "rounds", job.train.rounds, "eval_every_rounds",
                                        job.train.eval_every_rounds, "eval_samples", job.train.eval_samples, "seed",
                                        job.train.seed, "local_steps", job.train.local_steps));
  SKETCHPS_RETURN_IF_ERROR(ReadOuterOptimizer(train, job.train.outer));
  std::string inner_state = "reset";
  SKETCHPS_RETURN_IF_ERROR(train.Get("inner_state", inner_state));
  SKETCHPS_RETURN_IF_ERROR(train.Finish());
  if (inner_state != "reset" && inner_state != "keep") {
    return absl::InvalidArgumentError("train.inner_state: '" + inner_state + "' is not reset or keep");
  }
  job.train.keep_inner_state = inner_state == "keep";
  SKETCHPS_ASSIGN_OR_RETURN(ConfigReader ckpt, root.Child("checkpoint"));
  std::string on_damaged = "refuse";
  SKETCHPS_RETURN_IF_ERROR(
      ckpt.GetAll("dir", job.checkpoint.dir, "every_rounds", job.checkpoint.every_rounds, "on_damaged", on_damaged));
  SKETCHPS_RETURN_IF_ERROR(ckpt.Finish());
  if (on_damaged != "refuse" && on_damaged != "older") {
    return absl::InvalidArgumentError("checkpoint.on_damaged: '" + on_damaged + "' is not refuse or older");
  }
  job.checkpoint.older_if_damaged = on_damaged == "older";
  SKETCHPS_ASSIGN_OR_RETURN(ConfigReader peer, root.Child("peer"));
  std::string on_failure = "regroup";
  SKETCHPS_RETURN_IF_ERROR(peer.GetAll("timeout_seconds", job.peer.timeout_seconds, "on_failure", on_failure));
  SKETCHPS_RETURN_IF_ERROR(peer.Finish());
  if (on_failure == "regroup") {
    job.peer.on_failure = OnPeerFailure::kRegroup;
  } else if (on_failure == "stop") {
    job.peer.on_failure = OnPeerFailure::kStop;
  } else {
    return absl::InvalidArgumentError("peer.on_failure: '" + on_failure + "' is not regroup or stop");
  }
  SKETCHPS_ASSIGN_OR_RETURN(ConfigReader ps, root.Child("ps"));
  SKETCHPS_RETURN_IF_ERROR(ps.GetAll("round_deadline_seconds", job.ps.round_deadline_seconds, "elastic", job.ps.elastic,
                                     "initial_workers", job.ps.initial_workers));
  SKETCHPS_RETURN_IF_ERROR(ps.Finish());
  return absl::OkStatus();
}

// The sections whose spans resolve against the job's clock: read after Validate has bounded it.
absl::Status ReadClockedSections(ConfigReader& root, JobSpec& job) {
  SKETCHPS_RETURN_IF_ERROR(ReadOptimizer(root, job));
  SKETCHPS_ASSIGN_OR_RETURN(ConfigReader scheme, root.Child("scheme"));
  SKETCHPS_ASSIGN_OR_RETURN(job.scheme, ParseSchemeSection(scheme, job.clock()));
  if (!job.scheme.global_momentum && !job.local_steps() && job.optimizer.nesterov) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.nesterov: scheme ", job.scheme.name,
        " keeps its own momentum and the optimizer applies none (optimizer.momentum is ignored), so nesterov would "
        "change nothing: remove it"));
  }
  if (job.optimizer.kind == OptimizerKind::kExternal) {
    if (!job.scheme.global_momentum) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scheme.name: ", job.scheme.name,
          " keeps its own momentum, which a torch optimizer would apply again: not with optimizer.name external"));
    }
    if (job.decentralized() && job.peer.on_failure == OnPeerFailure::kRegroup) {
      return absl::InvalidArgumentError(
          "peer.on_failure: regroup rolls the replicas back a round, which a torch optimizer's state cannot "
          "follow: set peer.on_failure: stop with optimizer.name external");
    }
  }
  return absl::OkStatus();
}

absl::Status Validate(const JobSpec& j) {
  auto bad = [](const std::string& key, const std::string& why) {
    return absl::InvalidArgumentError(key + ": " + why);
  };
  if (j.job_id.empty()) return bad("job_id", "must not be empty");
  if (j.workers < 1 || j.workers > 1024) return bad("workers", "must be in [1, 1024]");
  if (j.servers < 1 || j.servers > 256) return bad("servers", "must be in [1, 256]");
  if (j.data.batch_size < 1) return bad("data.batch_size", "must be >= 1");
  if (j.data.train_samples < 1) return bad("data.train_samples", "must be >= 1");
  if (j.train.local_steps < 1) return bad("train.local_steps", "must be >= 1 (1: no local steps)");
  if (j.train.local_steps > 1000000) return bad("train.local_steps", "must be <= 1000000");
  if (!(j.train.epochs > 0) && j.train.rounds == 0) return bad("train.epochs", "must be > 0 (or set train.rounds)");
  if (j.train.rounds == 0 && !(j.train.epochs * j.rounds_per_epoch() <= kMaxJobRounds))
    return bad("train.epochs", absl::StrCat("gives more than ", kMaxJobRounds, " rounds"));
  if (j.train.rounds > kMaxJobRounds) return bad("train.rounds", absl::StrCat("must be <= ", kMaxJobRounds));
  if (j.checkpoint.every_rounds < 1) return bad("checkpoint.every_rounds", "must be >= 1");
  if (!(j.peer.timeout_seconds > 0) || j.peer.timeout_seconds > 86400)
    return bad("peer.timeout_seconds", "must be in (0, 86400]");
  if (!(j.ps.round_deadline_seconds >= 0) || j.ps.round_deadline_seconds > 3600)
    return bad("ps.round_deadline_seconds", "must be in [0, 3600] (0: no deadline)");
  if (j.ps.round_deadline_seconds > 0 && j.decentralized())
    return bad("ps.round_deadline_seconds", "applies to mode: ps only (decentralized rounds have no deadline)");
  if (j.ps.elastic && j.decentralized())
    return bad("ps.elastic", "applies to mode: ps only (decentralized peers regroup instead: peer.on_failure)");
  if (j.ps.initial_workers != 0 && !j.ps.elastic) return bad("ps.initial_workers", "needs ps.elastic: true");
  if (j.ps.initial_workers > j.workers)
    return bad("ps.initial_workers", absl::StrCat("must be in [1, workers = ", j.workers, "] (0: all)"));
  return absl::OkStatus();
}

// A scheme configuration that declares it cannot take a worker joining mid-job (BoundScheme's
// capability, schemes/registry.h) is refused with an elastic job.
absl::Status CheckElasticScheme(const JobSpec& j) {
  if (!j.ps.elastic || j.scheme.elastic_refusal.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("ps.elastic: ", j.scheme.elastic_refusal, ": not with an elastic job"));
}

}  // namespace

const char* ModeName(Mode mode) { return mode == Mode::kDecentralized ? "decentralized" : "ps"; }

Fingerprint JobFingerprint(const JobSpec& j, const YAML::Node& root) {
  auto hash = [](const std::string& text) { return XXH3_64bits(text.data(), text.size()); };
  const auto& o = j.optimizer;
  const std::string lr = absl::StrCat(static_cast<int>(o.lr.kind), ",", o.lr.base_lr, ",", o.lr.warmup_epochs, ",",
                                      o.lr.warmup_start_factor, ",", absl::StrJoin(o.lr.milestones, ";"), ",",
                                      o.lr.gamma, ",", o.lr.min_lr);
  YAML::Emitter scheme;
  scheme << root["scheme"];
  return Fingerprint{
      {"mode", hash(ModeName(j.mode))},
      {"workers", hash(absl::StrCat(j.workers))},
      {"servers", hash(absl::StrCat(j.servers))},
      {"model", hash(j.model == kCustomModel ? absl::StrCat(j.model, "|", LayoutText(j.layout)) : j.model)},
      {"data.batch_size", hash(absl::StrCat(j.data.batch_size))},
      {"data.train_samples", hash(absl::StrCat(j.data.train_samples))},
      {"train.epochs", hash(absl::StrCat(j.train.epochs))},
      {"train.rounds", hash(absl::StrCat(j.train.rounds))},
      {"train.seed", hash(absl::StrCat(j.train.seed))},
      {"train.local_steps",
       hash(absl::StrCat(j.train.local_steps, ",", static_cast<int>(j.train.outer.kind), ",", j.train.outer.lr, ",",
                         j.train.outer.momentum, j.train.keep_inner_state ? ",keep" : ""))},
      {"optimizer",
       hash(absl::StrCat(lr, "|", OptimizerName(o.kind), ",", o.momentum, ",", o.nesterov, ",", o.weight_decay, ",",
                         o.beta1, ",", o.beta2, ",", o.eps, ",", absl::StrJoin(o.no_decay, ";"), ",",
                         o.freeze_variance_round ? absl::StrCat(*o.freeze_variance_round) : "-"))},
      {"scheme", hash(scheme.c_str())},
      {"ps.elastic", hash(absl::StrCat(j.ps.elastic, ",", j.ps.initial_workers))}};
}

double JobSpec::rounds_per_epoch() const {
  const double per_round = static_cast<double>(workers) * data.batch_size * static_cast<double>(train.local_steps);
  return std::max(1.0, std::floor(static_cast<double>(data.train_samples) / per_round));
}

OptimizerConfig JobSpec::replicated_optimizer() const {
  if (!local_steps()) return optimizer;
  OptimizerConfig outer;
  outer.kind = OptimizerKind::kSgd;
  outer.lr.base_lr = train.outer.lr;  // constant: the inner optimizer follows the schedule
  outer.lr.total_epochs = optimizer.lr.total_epochs;
  outer.momentum = train.outer.momentum;
  outer.nesterov = train.outer.kind == OuterOptimizerSpec::Kind::kNesterov && train.outer.momentum > 0;
  return outer;
}

JobClock JobSpec::clock() const { return JobClock{rounds_per_epoch(), total_rounds()}; }

std::uint64_t JobSpec::total_rounds() const {
  if (train.rounds > 0) return train.rounds;
  return static_cast<std::uint64_t>(std::ceil(train.epochs * rounds_per_epoch()));
}

const std::string& DefaultJobSpecYaml() {
  static const std::string yaml = generated::kDefaultJobYaml;  // job/default_job.yaml
  return yaml;
}

namespace {

absl::StatusOr<JobSpec> ParseJobSpecOrThrow(const std::string& yaml_text, const std::string& source,
                                            const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": YAML syntax error: ", e.what()));
  }
  if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  for (const auto& o : overrides) SKETCHPS_RETURN_IF_ERROR(ApplyOverride(root, o));
  JobSpec job;
  ConfigReader r(root, "");
  SKETCHPS_RETURN_IF_ERROR(r.Get("job_id", job.job_id));
  std::string mode = "ps";
  SKETCHPS_RETURN_IF_ERROR(r.Get("mode", mode));
  if (mode == "ps") {
    job.mode = Mode::kPs;
  } else if (mode == "decentralized") {
    job.mode = Mode::kDecentralized;
  } else {
    return absl::InvalidArgumentError("mode: '" + mode + "' is not ps or decentralized");
  }
  SKETCHPS_RETURN_IF_ERROR(r.Get("workers", job.workers));
  SKETCHPS_RETURN_IF_ERROR(r.Get("servers", job.servers));
  SKETCHPS_RETURN_IF_ERROR(r.Get("model", job.model));
  const bool has_layers = r.Has("layers");
  SKETCHPS_RETURN_IF_ERROR(ReadSections(r, job));
  SKETCHPS_RETURN_IF_ERROR(Validate(job));
  SKETCHPS_RETURN_IF_ERROR(ReadClockedSections(r, job));
  SKETCHPS_RETURN_IF_ERROR(r.Finish());
  if (job.model == kCustomModel) {
    if (has_layers) {
      SKETCHPS_ASSIGN_OR_RETURN(job.layout, CustomLayout(root["layers"], "layers"));
    }
  } else if (has_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layers: only with model: custom (model ", job.model, " has its own layout)"));
  } else {
    SKETCHPS_ASSIGN_OR_RETURN(job.layout, ModelLayout(job.model));
  }
  SKETCHPS_RETURN_IF_ERROR(CheckNoDecay(job));
  SKETCHPS_RETURN_IF_ERROR(CheckLocalSteps(job));
  SKETCHPS_RETURN_IF_ERROR(CheckElasticScheme(job));
  if (job.ps.elastic && job.ps.initial_workers == 0) job.ps.initial_workers = job.workers;
  job.effective_yaml = YAML::Dump(root);
  job.fingerprint = JobFingerprint(job, root);
  return job;
}

}  // namespace

absl::StatusOr<JobSpec> ParseJobSpec(const std::string& yaml_text, const std::string& source,
                                     const std::vector<std::string>& overrides) {
  // yaml-cpp reports problems by throwing (also from node access on a document of the wrong shape):
  // none may leave as an exception.
  try {
    return ParseJobSpecOrThrow(yaml_text, source, overrides);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", e.what()));
  }
}

absl::StatusOr<JobSpec> LoadJobSpec(const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty()) return ParseJobSpec(DefaultJobSpecYaml(), "default job spec", overrides);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {  // an ifstream reads a directory as an empty job
    return absl::InvalidArgumentError(absl::StrCat("job spec '", path, "': is a directory, not a job file"));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("job spec '", path, "': cannot open the file"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseJobSpec(buffer.str(), path, overrides);
}

}  // namespace sketchps
