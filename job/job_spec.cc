#include "job/job_spec.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/config/config_reader.h"
#include "common/status.h"
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
  return r.Get("min_lr", s.min_lr);
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

absl::Status ReadSections(ConfigReader& root, JobSpec& job) {
  SKETCHPS_ASSIGN_OR_RETURN(ConfigReader data, root.Child("data"));
  SKETCHPS_RETURN_IF_ERROR(
      data.GetAll("path", job.data.path, "batch_size", job.data.batch_size, "train_samples", job.data.train_samples));
  SKETCHPS_RETURN_IF_ERROR(data.Finish());
  SKETCHPS_ASSIGN_OR_RETURN(ConfigReader train, root.Child("train"));
  SKETCHPS_RETURN_IF_ERROR(train.GetAll("epochs", job.train.epochs, "rounds", job.train.rounds, "eval_every_rounds",
                                        job.train.eval_every_rounds, "eval_samples", job.train.eval_samples, "seed",
                                        job.train.seed));
  SKETCHPS_RETURN_IF_ERROR(train.Finish());
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

// Schemes whose workers must all have seen every round cannot take a worker that joins mid-job.
absl::Status CheckElasticScheme(const JobSpec& j, const YAML::Node& scheme) {
  if (!j.ps.elastic) return absl::OkStatus();
  if (j.scheme.name == "scalecom") {
    return absl::InvalidArgumentError(
        "ps.elastic: scalecom's leader cycles over every slot (round mod workers), so a round led by an absent "
        "slot would apply nothing: not with an elastic job");
  }
  if (!scheme.IsDefined() || !scheme.IsMap()) return absl::OkStatus();  // IsDefined: false for a missing key
  const YAML::Node own = scheme[j.scheme.name];
  if (!own.IsDefined() || !own.IsMap()) return absl::OkStatus();
  for (const char* key : {"budget_factor", "recovery_floor"}) {
    if (own[key].IsDefined() && own[key].as<double>(0) != (std::string(key) == "budget_factor" ? 1.0 : 0.0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ps.elastic: scheme.", j.scheme.name, ".", key,
          " adapts the candidates from every round's G_t, which a worker joining mid-job has not seen: not with an "
          "elastic job"));
    }
  }
  return absl::OkStatus();
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
      {"optimizer",
       hash(absl::StrCat(lr, "|", OptimizerName(o.kind), ",", o.momentum, ",", o.nesterov, ",", o.weight_decay, ",",
                         o.beta1, ",", o.beta2, ",", o.eps, ",", absl::StrJoin(o.no_decay, ";"), ",",
                         o.freeze_variance_round ? absl::StrCat(*o.freeze_variance_round) : "-"))},
      {"scheme", hash(scheme.c_str())},
      {"ps.elastic", hash(absl::StrCat(j.ps.elastic, ",", j.ps.initial_workers))}};
}

double JobSpec::rounds_per_epoch() const {
  return std::max(
      1.0, std::floor(static_cast<double>(data.train_samples) / (static_cast<double>(workers) * data.batch_size)));
}

JobClock JobSpec::clock() const { return JobClock{rounds_per_epoch(), total_rounds()}; }

std::uint64_t JobSpec::total_rounds() const {
  if (train.rounds > 0) return train.rounds;
  return static_cast<std::uint64_t>(std::ceil(train.epochs * rounds_per_epoch()));
}

const std::string& DefaultJobSpecYaml() {
  static const std::string yaml =
      R"(# The embedded default job: top-k with error feedback on Fashion-MNIST with a small CNN.
job_id: sketchps-default
mode: ps
workers: 4
servers: 2
model: cnn
data: {path: /usr/share/datasets/fashion-mnist, batch_size: 32, train_samples: 60000}
train: {epochs: 1, eval_every_rounds: 100, eval_samples: 2000, seed: 1}
optimizer: {lr: 0.05}  # SGD with momentum 0.9 (the default)
scheme: {name: topk, density: 0.01}  # the fastest to the target here (docs/reports/performance.md)
)";
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
  SKETCHPS_RETURN_IF_ERROR(CheckElasticScheme(job, static_cast<const YAML::Node&>(root)["scheme"]));
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
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("job spec '", path, "': cannot open the file"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseJobSpec(buffer.str(), path, overrides);
}

}  // namespace sketchps
