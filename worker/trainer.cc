#include "worker/trainer.h"

#include <algorithm>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/status.h"
#include "schemes/replica.h"
#include "schemes/shard.h"
#include "spdlog/spdlog.h"
#include "worker/evaluate.h"
#include "worker/fashion_mnist.h"
#include "worker/models.h"
#include "worker/peer_transport.h"
#include "worker/ps_transport.h"

namespace sketchps::worker {
namespace {

struct Setup {
  std::unique_ptr<Model> model;
  Dataset train;
  std::optional<Dataset> test;  // rank 0
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

absl::StatusOr<Setup> Prepare(const TrainerOptions& o) {
  SKETCHPS_RETURN_IF_ERROR(CheckOptions(o));
  Setup s;
  SKETCHPS_ASSIGN_OR_RETURN(Model model, Model::Create(o.job.model, o.job.train.seed));
  s.model = std::make_unique<Model>(std::move(model));
  SKETCHPS_RETURN_IF_ERROR(LoadData(o, s));
  SKETCHPS_ASSIGN_OR_RETURN(s.shards, MakeShardMap(s.model->flat().layers(), o.job.servers));
  if (o.job.mode == "decentralized") {
    SKETCHPS_ASSIGN_OR_RETURN(s.transport, StartPeers(PeerOptions{o.job.job_id, o.rank, o.job.workers, o.listen, o.peers,
                                                                  o.peer_timeout},
                                                      s.shards));
  } else {
    SKETCHPS_ASSIGN_OR_RETURN(s.transport, ConnectParameterServers(ClientOptions{o.job.job_id, o.rank, o.job.workers,
                                                                                 o.servers, o.rpc_timeout, o.patience}));
  }
  SKETCHPS_ASSIGN_OR_RETURN(s.replica, Replica::Create(ReplicaOptions{
                                           o.rank, o.job.workers, s.shards, s.model->flat().layers(), o.job.scheme.make,
                                           o.job.scheme.density, o.job.scheme.global_momentum, o.job.optimizer,
                                           o.job.train.seed}));
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
  const std::uint64_t steps = StepsPerEpoch(o.job.data.train_samples, o.job.workers, o.job.data.batch_size);
  if (steps == 0) return absl::InvalidArgumentError("data: fewer train_samples than workers * batch_size");
  const std::uint64_t epoch = round / steps;
  if (epoch != s.permutation_epoch) {
    s.permutation = EpochPermutation(o.job.data.train_samples, o.job.train.seed, epoch);
    s.permutation_epoch = epoch;
  }
  SKETCHPS_ASSIGN_OR_RETURN(auto indices, StepIndices(s.permutation, round % steps, o.rank, o.job.workers, o.job.data.batch_size));
  SKETCHPS_ASSIGN_OR_RETURN(Batch batch, MakeBatch(s.train, indices));
  return s.model->ForwardBackward(batch.input, batch.target);
}

absl::StatusOr<nlohmann::json> RunOneRound(const TrainerOptions& o, Setup& s, std::uint64_t round) {
  const absl::Time t0 = absl::Now();
  SKETCHPS_ASSIGN_OR_RETURN(const float loss, ComputeGradient(o, s, round));
  const absl::Time t1 = absl::Now();
  const TransportCounters before = s.transport->counters();
  const RoundInfo info{round, EpochOfRound(round, o.job.rounds_per_epoch())};
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
                        {"communicate_s", communicate}};
}

absl::StatusOr<EvalResult> EvaluateTest(Setup& s) { return Evaluate(*s.model, *s.test); }

}  // namespace

bool IsReplicaDivergence(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition && absl::StrContains(status.message(), kReplicaDiverged);
}

absl::StatusOr<TrainSummary> Train(const TrainerOptions& o) {
  SKETCHPS_ASSIGN_OR_RETURN(Setup s, Prepare(o));
  MetricsLog log;
  SKETCHPS_RETURN_IF_ERROR(log.Open(o.metrics_out));
  const std::uint64_t total = o.job.total_rounds();
  spdlog::info("worker {}/{}: {} ({} parameters), scheme {}, rounds {}..{} of {}", o.rank, o.job.workers, o.job.model,
               s.model->flat().dim(), o.job.scheme.name, s.start_round, total, total);
  TrainSummary summary{s.start_round, 0, std::nullopt,
                       WeightsChecksum({s.model->flat().params(), s.model->flat().dim()})};
  for (std::uint64_t round = s.start_round; round < total; ++round) {
    SKETCHPS_ASSIGN_OR_RETURN(nlohmann::json record, RunOneRound(o, s, round));
    const bool last = round + 1 == total;
    if (s.test && (last || (o.job.train.eval_every_rounds > 0 && (round + 1) % o.job.train.eval_every_rounds == 0))) {
      SKETCHPS_ASSIGN_OR_RETURN(EvalResult eval, EvaluateTest(s));
      record["test_accuracy"] = eval.accuracy;
      record["test_loss"] = eval.mean_loss;
      summary.final_test_accuracy = eval.accuracy;
    }
    const auto& p = s.model->flat();
    summary.weights_checksum = WeightsChecksum({p.params(), p.dim()});
    record["checksum"] = absl::StrFormat("%016x", summary.weights_checksum);
    log.Write(record);
    ++summary.rounds;
    if (o.log_every_rounds > 0 && (round % o.log_every_rounds == 0 || last)) {
      spdlog::info("round {}/{} loss {:.4f}{}", round + 1, total, record["loss"].get<double>(),
                   record.contains("test_accuracy") ? absl::StrFormat(" test accuracy %.4f", record["test_accuracy"].get<double>()) : "");
    }
  }
  const auto& p = s.model->flat();
  summary.final_weights.assign(p.params(), p.params() + p.dim());
  return summary;
}

}  // namespace sketchps::worker
