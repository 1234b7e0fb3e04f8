#include "worker/trainer.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/status.h"
#include "engine/replica.h"
#include "engine/shard.h"
#include "spdlog/spdlog.h"
#include "worker/evaluate.h"
#include "worker/fashion_mnist.h"
#include "worker/models.h"
#include "worker/peer_transport.h"
#include "worker/ps_transport.h"
#include "worker/round_plan.h"

namespace sketchps::worker {
namespace {

// A worker's state at the start of a round: what a regroup rolls back to.
struct Snapshot {
  std::uint64_t round = ~0ull;
  std::vector<float> params;
  std::vector<std::vector<float>> velocity;  // per shard (empty without momentum)
};

struct Setup {
  RoundPlan plan;
  OptimizerConfig optimizer;  // the job's, with the learning rate scaled to the membership
  std::array<Snapshot, 2> snapshots;  // by round parity (decentralized mode with regroup)
  std::optional<nlohmann::json> regroup_note;  // for the next metrics record
  std::unique_ptr<Model> model;
  Dataset train;
  std::optional<Dataset> test;  // rank 0
  std::unique_ptr<BackgroundEvaluation> eval;  // rank 0, on first use (after `test`: it refers to it)
  std::uint64_t eval_round = 0;      // the round whose weights `eval` evaluates
  ShardMap shards;
  std::unique_ptr<Transport> transport;
  std::unique_ptr<Replica> replica;
  std::uint64_t start_round = 0;
  std::uint64_t permutation_epoch = ~0ull;
  std::vector<std::uint64_t> permutation;  // of permutation_epoch
};

absl::Status CheckOptions(const TrainerOptions& o) {
  if (o.job.mode == "ps" && o.servers.size() != o.job.servers) {
    return absl::InvalidArgumentError(absl::StrCat("--servers: ", o.servers.size(), " addresses for a job with servers: ",
                                                   o.job.servers));
  }
  if (o.rank >= o.job.workers) {
    return absl::InvalidArgumentError(absl::StrCat("--rank: ", o.rank, " is not in [0, workers = ", o.job.workers, ")"));
  }
  return absl::OkStatus();
}

absl::Status LoadData(const TrainerOptions& o, Setup& s) {
  SKETCHPS_ASSIGN_OR_RETURN(s.train, LoadFashionMnist(o.job.data.path, Split::kTrain));
  if (o.job.data.train_samples > s.train.size()) {
    return absl::InvalidArgumentError(absl::StrCat("data.train_samples: ", o.job.data.train_samples, " > the ",
                                                   s.train.size(), " samples in ", o.job.data.path));
  }
  if (o.rank == 0) {
    SKETCHPS_ASSIGN_OR_RETURN(s.test, LoadFashionMnist(o.job.data.path, Split::kTest));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Replica>> MakeReplica(const TrainerOptions& o, const Setup& s) {
  return Replica::Create(ReplicaOptions{s.plan.rank, s.plan.workers, s.shards, s.model->flat().layers(), o.job.scheme.make,
                                        o.job.scheme.density, o.job.scheme.global_momentum, s.optimizer, o.job.train.seed});
}

absl::StatusOr<Setup> Prepare(const TrainerOptions& o) {
  SKETCHPS_RETURN_IF_ERROR(CheckOptions(o));
  Setup s;
  SKETCHPS_ASSIGN_OR_RETURN(Model model, Model::Create(o.job.model, o.job.train.seed));
  s.model = std::make_unique<Model>(std::move(model));
  SKETCHPS_RETURN_IF_ERROR(LoadData(o, s));
  SKETCHPS_ASSIGN_OR_RETURN(s.shards, MakeShardMap(s.model->flat().layers(), o.job.servers));
  if (o.job.mode == "decentralized") {
    SKETCHPS_ASSIGN_OR_RETURN(s.transport, StartPeers(PeerOptions{o.job.job_id, o.rank, o.job.workers, o.listen, o.peers,
                                                                  o.peer_timeout, o.regroup},
                                                      s.shards));
  } else {
    SKETCHPS_ASSIGN_OR_RETURN(s.transport, ConnectParameterServers(ClientOptions{o.job.job_id, o.rank, o.job.workers,
                                                                                 o.servers, o.rpc_timeout, o.patience}));
  }
  SKETCHPS_ASSIGN_OR_RETURN(s.plan, RoundPlan::Initial(o.job, o.rank));
  s.optimizer = o.job.optimizer;
  SKETCHPS_ASSIGN_OR_RETURN(s.replica, MakeReplica(o, s));
  SKETCHPS_ASSIGN_OR_RETURN(s.start_round, s.transport->Start(s.model->flat().layers(), s.shards,
                                                               s.model->flat().params(), *s.replica));
  return s;
}

class MetricsLog {
 public:
  absl::Status Open(const std::string& path) {
    if (path.empty()) return absl::OkStatus();
    out_.open(path, std::ios::app);
    if (!out_) return absl::InvalidArgumentError(absl::StrCat("--metrics-out ", path, ": cannot open for writing"));
    return absl::OkStatus();
  }
  void Write(const nlohmann::json& record) {
    if (out_.is_open()) out_ << record.dump() << "\n" << std::flush;
  }

 private:
  std::ofstream out_;
};

struct RoundTimes {
  double compute = 0, compress = 0, communicate = 0;
};

absl::StatusOr<float> ComputeGradient(const TrainerOptions& o, Setup& s, std::uint64_t round) {
  const DataPosition at = s.plan.At(round);
  if (at.epoch != s.permutation_epoch) {
    s.permutation = EpochPermutation(o.job.data.train_samples, o.job.train.seed, at.epoch);
    s.permutation_epoch = at.epoch;
  }
  const std::uint64_t b = o.job.data.batch_size;
  const std::uint64_t first = at.position + s.plan.rank * b;
  if (first + b > s.permutation.size()) {
    return absl::InternalError(absl::StrCat("round ", round, ": samples [", first, ", ", first + b, ") beyond the epoch's ",
                                            s.permutation.size()));
  }
  SKETCHPS_ASSIGN_OR_RETURN(Batch batch, MakeBatch(s.train, std::span<const std::uint64_t>(s.permutation).subspan(first, b)));
  return s.model->ForwardBackward(batch.input, batch.target);
}

absl::StatusOr<nlohmann::json> RunOneRound(const TrainerOptions& o, Setup& s, std::uint64_t round) {
  const absl::Time t0 = absl::Now();
  SKETCHPS_ASSIGN_OR_RETURN(const float loss, ComputeGradient(o, s, round));
  const absl::Time t1 = absl::Now();
  const TransportCounters before = s.transport->counters();
  const RoundInfo info{round, s.plan.EpochOf(round)};
  SKETCHPS_ASSIGN_OR_RETURN(ReplicaRound out, s.replica->RunRound(s.transport->aggregator(), info,
                                                                   s.model->flat().grads(), s.model->flat().params()));
  const absl::Time t2 = absl::Now();
  const TransportCounters after = s.transport->counters();
  SKETCHPS_RETURN_IF_ERROR(s.transport->CheckReplica(round, s.shards, s.model->flat().params()));
  double communicate = 0;
  for (std::size_t i = 0; i < after.seconds.size(); ++i) {
    communicate = std::max(communicate, after.seconds[i] - before.seconds[i]);
  }
  const double exchange = absl::ToDoubleSeconds(t2 - t1);
  const bool raw = after.counts_raw;
  return nlohmann::json{{"round", round},
                        {"time", absl::ToDoubleSeconds(t2 - absl::UnixEpoch())},
                        {"epoch", info.epoch},
                        {"loss", loss},
                        {"bytes_up", raw ? after.raw_up - before.raw_up : out.traffic.bytes_up},
                        {"bytes_down", raw ? after.raw_down - before.raw_down : out.traffic.bytes_down},
                        {"wire_up", after.wire_up - before.wire_up},
                        {"wire_down", after.wire_down - before.wire_down},
                        {"dense_bytes", 4 * s.model->flat().dim()},
                        {"selected", out.selected},
                        {"skipped", out.skipped},
                        {"compute_s", absl::ToDoubleSeconds(t1 - t0)},
                        {"compress_s", std::max(0.0, exchange - communicate)},
                        {"communicate_s", communicate},
                        {"workers", s.plan.workers}};
}

// Writes `record`. It carries the result of an evaluation that has finished since the last record
// (test_accuracy, test_loss and test_round, the round whose weights were evaluated). When
// `evaluate`, starts evaluating this round's weights, unless the previous evaluation still runs
// (then this one is skipped); the last round waits for both, so the job's last record holds the
// final accuracy.
absl::Status Record(const TrainerOptions& o, Setup& s, MetricsLog& log, TrainSummary& summary, nlohmann::json record,
                    bool evaluate, bool last) {
  auto attach = [&](const absl::StatusOr<EvalResult>& eval) -> absl::Status {
    if (!eval.ok()) return eval.status();
    record["test_accuracy"] = eval->accuracy;
    record["test_loss"] = eval->mean_loss;
    record["test_round"] = s.eval_round;
    summary.final_test_accuracy = eval->accuracy;
    spdlog::info("round {} test accuracy {:.4f} (loss {:.4f})", s.eval_round + 1, eval->accuracy, eval->mean_loss);
    return absl::OkStatus();
  };
  if (s.eval) {
    if (auto done = s.eval->Poll()) SKETCHPS_RETURN_IF_ERROR(attach(*done));
  }
  if (evaluate) {
    if (!s.eval) {
      SKETCHPS_ASSIGN_OR_RETURN(s.eval, BackgroundEvaluation::Create(o.job.model, o.job.train.seed, *s.test));
    }
    const std::uint64_t round = record["round"].get<std::uint64_t>();
    if (s.eval->running() && !last) {
      // Waiting would stall every peer's next round; the next evaluation point will catch up.
      spdlog::warn("round {}: skipping the test evaluation, the one of round {} is still running", round + 1,
                   s.eval_round + 1);
      log.Write(record);
      return absl::OkStatus();
    }
    if (s.eval->running()) SKETCHPS_RETURN_IF_ERROR(attach(s.eval->Wait()));
    SKETCHPS_RETURN_IF_ERROR(s.eval->Start(s.model->flat().params(), s.model->flat().dim()));
    s.eval_round = round;
    if (last) SKETCHPS_RETURN_IF_ERROR(attach(s.eval->Wait()));
  }
  log.Write(record);
  return absl::OkStatus();
}

void SaveSnapshot(Setup& s, std::uint64_t round) {
  Snapshot& snap = s.snapshots[round % 2];
  const auto& p = s.model->flat();
  snap.round = round;
  snap.params.assign(p.params(), p.params() + p.dim());
  snap.velocity.clear();
  for (std::uint32_t i = 0; i < s.replica->num_shards(); ++i) snap.velocity.push_back(s.replica->optimizer(i).Velocity());
}

// After round `round` failed: regroup (or return the failure), roll back to the agreed round and
// rebuild what depends on the membership. Returns the round to run next.
absl::StatusOr<std::uint64_t> Regroup(const TrainerOptions& o, Setup& s, const absl::Status& failure, std::uint64_t round) {
  const absl::Time start = absl::Now();
  SKETCHPS_ASSIGN_OR_RETURN(Regrouped g, s.transport->Regroup(failure, round));
  const Snapshot& snap = s.snapshots[g.round % 2];
  if (snap.round != g.round) {
    return absl::InternalError(absl::StrCat("regroup: the survivors restart at round ", g.round, " but this worker (at round ",
                                            round, ") has no snapshot of it"));
  }
  std::copy(snap.params.begin(), snap.params.end(), s.model->flat().params());
  SKETCHPS_ASSIGN_OR_RETURN(s.plan, s.plan.Continue(o.job, g.round, g.workers, g.rank));
  const double scale = static_cast<double>(g.workers) / o.job.workers;
  s.optimizer.lr.base_lr = o.job.optimizer.lr.base_lr * scale;
  s.optimizer.lr.min_lr = o.job.optimizer.lr.min_lr * scale;
  SKETCHPS_ASSIGN_OR_RETURN(s.replica, MakeReplica(o, s));
  for (std::uint32_t i = 0; i < s.replica->num_shards(); ++i) {
    if (!snap.velocity[i].empty()) SKETCHPS_RETURN_IF_ERROR(s.replica->optimizer(i).SetVelocity(snap.velocity[i]));
  }
  if (g.rank == 0 && !s.test) {
    SKETCHPS_ASSIGN_OR_RETURN(s.test, LoadFashionMnist(o.job.data.path, Split::kTest));
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  s.regroup_note = nlohmann::json{{"epoch", g.epoch}, {"workers", g.workers}, {"lost", g.lost},
                                  {"rounds_redone", round - g.round}, {"seconds", seconds}};
  spdlog::warn("regrouped into epoch {} after {:.1f} s: rank {} of {} (lost {}), restarting at round {} of {} (learning rate x{:.3f})",
               g.epoch, seconds, g.rank, g.workers, g.lost, g.round, s.plan.last_round, scale);
  return g.round;
}

}  // namespace

bool IsReplicaDivergence(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition && absl::StrContains(status.message(), kReplicaDiverged);
}

absl::StatusOr<TrainSummary> Train(const TrainerOptions& o) {
  SKETCHPS_ASSIGN_OR_RETURN(Setup s, Prepare(o));
  MetricsLog log;
  SKETCHPS_RETURN_IF_ERROR(log.Open(o.metrics_out));
  spdlog::info("worker {}/{}: {} ({} parameters), scheme {}, rounds {}..{} of {}", o.rank, o.job.workers, o.job.model,
               s.model->flat().dim(), o.job.scheme.name, s.start_round, s.plan.last_round, s.plan.last_round);
  TrainSummary summary;
  summary.first_round = s.start_round;
  summary.weights_checksum = WeightsChecksum({s.model->flat().params(), s.model->flat().dim()});
  const bool can_regroup = o.job.mode == "decentralized" && o.regroup;
  std::uint64_t round = s.start_round;
  while (round < s.plan.last_round) {
    if (can_regroup) SaveSnapshot(s, round);
    auto outcome = RunOneRound(o, s, round);
    if (!outcome.ok()) {
      if (!can_regroup) return outcome.status();
      SKETCHPS_ASSIGN_OR_RETURN(round, Regroup(o, s, outcome.status(), round));
      continue;
    }
    nlohmann::json record = *std::move(outcome);
    const bool last = round + 1 == s.plan.last_round;
    const bool eval_due = last || (o.job.train.eval_every_rounds > 0 && (round + 1) % o.job.train.eval_every_rounds == 0);
    const auto& p = s.model->flat();
    summary.weights_checksum = WeightsChecksum({p.params(), p.dim()});
    record["checksum"] = absl::StrFormat("%016x", summary.weights_checksum);
    if (s.regroup_note) record["regroup"] = *std::exchange(s.regroup_note, std::nullopt);
    if (o.log_every_rounds > 0 && (round % o.log_every_rounds == 0 || last)) {
      spdlog::info("round {}/{} loss {:.4f}", round + 1, s.plan.last_round, record["loss"].get<double>());
    }
    SKETCHPS_RETURN_IF_ERROR(Record(o, s, log, summary, std::move(record), s.plan.rank == 0 && eval_due, last));
    ++summary.rounds;
    ++round;
  }
  const auto& p = s.model->flat();
  summary.final_workers = s.plan.workers;
  summary.final_weights.assign(p.params(), p.params() + p.dim());
  return summary;
}

}  // namespace sketchps::worker
