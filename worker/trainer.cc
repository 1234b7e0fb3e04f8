#include "worker/trainer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "common/checksum.h"
#include "common/gradient_dump.h"
#include "common/status.h"
#include "engine/aggregator.h"
#include "engine/replica.h"
#include "spdlog/spdlog.h"
#include "worker/evaluate.h"
#include "worker/fashion_mnist.h"
#include "worker/gradient_watch.h"
#include "worker/models.h"
#include "worker/peer_transport.h"
#include "worker/ps_transport.h"
#include "worker/round_plan.h"
#include "worker/worker_metrics.h"

namespace sketchps::worker {
namespace {

double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

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

// A worker's state at the start of a round: what a regroup rolls back to.
struct Snapshot {
  std::uint64_t round = ~0ull;
  std::vector<float> params;
  std::vector<std::vector<float>> velocity;  // per shard (empty without momentum)
};

// One shard's part of a round, as its thread saw it.
struct ShardRun {
  absl::StatusOr<RoundOutcome> outcome = absl::UnknownError("not run");
  double seconds = 0;  // from the shard's start (its gradients complete) to its end
};

class Trainer {
 public:
  explicit Trainer(const TrainerOptions& options) : o_(options) {}

  absl::Status Prepare();
  absl::StatusOr<TrainSummary> Run();

 private:
  bool can_regroup() const {
    return o_.job.decentralized() && o_.job.peer.on_failure == OnPeerFailure::kRegroup;
  }
  absl::Status CheckOptions() const;
  absl::Status StartTransport();
  absl::StatusOr<std::unique_ptr<Replica>> MakeReplica() const;
  absl::StatusOr<Batch> BatchOf(std::uint64_t round);
  absl::StatusOr<nlohmann::json> RunRound(std::uint64_t round);
  absl::StatusOr<float> ComputeAndExchange(std::uint64_t round, std::vector<ShardRun>& shards);
  nlohmann::json Record(std::uint64_t round, absl::Time start, absl::Time computed, absl::Time end, float loss,
                        const ReplicaRound& out, const TransportCounters& before, const std::vector<ShardRun>& shards) const;
  absl::Status Evaluate(std::uint64_t round, bool final, nlohmann::json& record);
  absl::Status DumpGradient(std::uint64_t round) const;
  void SaveSnapshot(std::uint64_t round);
  absl::StatusOr<std::uint64_t> Regroup(const absl::Status& failure, std::uint64_t round);

  const TrainerOptions& o_;

  // The model and the data (constant after Prepare).
  std::unique_ptr<Model> model_;
  Dataset train_, test_;
  ShardMap shards_;
  std::unique_ptr<GradientWatch> watch_;

  // The membership: rank, workers and data plan, learning rate, transport, replica (a regroup
  // replaces them).
  RoundPlan plan_;
  OptimizerConfig optimizer_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Replica> replica_;
  std::uint64_t start_round_ = 0;

  // The data order of the current data epoch.
  std::uint64_t permutation_epoch_ = ~0ull;
  std::vector<std::uint64_t> permutation_;

  // Decentralized regroup: the last two round starts, and the note for the next record.
  std::array<Snapshot, 2> snapshots_;
  std::optional<nlohmann::json> regroup_note_;

  MetricsLog log_;
  TrainSummary summary_;
};

absl::Status Trainer::CheckOptions() const {
  if (!o_.job.decentralized() && o_.servers.size() != o_.job.servers) {
    return absl::InvalidArgumentError(absl::StrCat("--servers: ", o_.servers.size(), " addresses for a job with servers: ",
                                                   o_.job.servers));
  }
  if (o_.rank >= o_.job.workers) {
    return absl::InvalidArgumentError(absl::StrCat("--rank: ", o_.rank, " is not in [0, workers = ", o_.job.workers, ")"));
  }
  if (!o_.dump_rounds.empty() && o_.dump_dir.empty()) return absl::InvalidArgumentError("--dump-gradients: needs --dump-dir");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Replica>> Trainer::MakeReplica() const {
  return Replica::Create(ReplicaOptions{plan_.rank, plan_.workers, shards_, model_->flat().layers(), o_.job.scheme.make,
                                        o_.job.scheme.density, o_.job.scheme.global_momentum, optimizer_, o_.job.train.seed});
}

absl::Status Trainer::StartTransport() {
  if (o_.job.decentralized()) {
    PeerOptions peers;
    peers.job_id = o_.job.job_id;
    peers.rank = o_.rank;
    peers.num_workers = o_.job.workers;
    peers.listen = o_.listen;
    peers.peers = o_.peers;
    peers.port_file = o_.port_file;
    peers.peers_file = o_.peers_file;
    peers.patience = o_.patience;
    peers.peer_timeout = o_.peer_timeout;
    peers.regroup = can_regroup();
    peers.tls = o_.tls;
    peers.fingerprint = o_.job.fingerprint;
    SKETCHPS_ASSIGN_OR_RETURN(transport_, StartPeers(peers, shards_));
  } else {
    ClientOptions client;
    client.job_id = o_.job.job_id;
    client.worker_id = o_.rank;
    client.num_workers = o_.job.workers;
    client.servers = o_.servers;
    client.rpc_timeout = o_.rpc_timeout;
    client.patience = o_.patience;
    client.tls = o_.tls;
    client.fingerprint = o_.job.fingerprint;
    SKETCHPS_ASSIGN_OR_RETURN(transport_, ConnectParameterServers(std::move(client)));
  }
  return absl::OkStatus();
}

absl::Status Trainer::Prepare() {
  SKETCHPS_RETURN_IF_ERROR(CheckOptions());
  SKETCHPS_ASSIGN_OR_RETURN(Model model, Model::Create(o_.job.model, o_.job.train.seed));
  model_ = std::make_unique<Model>(std::move(model));
  SKETCHPS_ASSIGN_OR_RETURN(train_, LoadFashionMnist(o_.job.data.path, Split::kTrain));
  if (o_.job.data.train_samples > train_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("data.train_samples: ", o_.job.data.train_samples, " > the ",
                                                   train_.size(), " samples in ", o_.job.data.path));
  }
  SKETCHPS_ASSIGN_OR_RETURN(test_, LoadFashionMnist(o_.job.data.path, Split::kTest));
  SKETCHPS_ASSIGN_OR_RETURN(shards_, MakeShardMap(model_->flat().layers(), o_.job.servers));
  SKETCHPS_ASSIGN_OR_RETURN(watch_, GradientWatch::Create(model_->flat(), shards_));
  SKETCHPS_RETURN_IF_ERROR(StartTransport());
  SKETCHPS_ASSIGN_OR_RETURN(plan_, RoundPlan::Initial(o_.job, o_.rank));
  optimizer_ = o_.job.optimizer;
  SKETCHPS_ASSIGN_OR_RETURN(replica_, MakeReplica());
  SKETCHPS_ASSIGN_OR_RETURN(start_round_, transport_->Start(model_->flat().layers(), shards_, model_->flat().params(),
                                                            *replica_));
  return log_.Open(o_.metrics_out);
}

absl::StatusOr<Batch> Trainer::BatchOf(std::uint64_t round) {
  const DataPosition at = plan_.At(round);
  if (at.epoch != permutation_epoch_) {
    permutation_ = EpochPermutation(o_.job.data.train_samples, o_.job.train.seed, at.epoch);
    permutation_epoch_ = at.epoch;
  }
  const std::uint64_t b = o_.job.data.batch_size;
  const std::uint64_t first = at.position + plan_.rank * b;
  if (first + b > permutation_.size()) {
    return absl::InternalError(absl::StrCat("round ", round, ": samples [", first, ", ", first + b, ") beyond the epoch's ",
                                            permutation_.size()));
  }
  return MakeBatch(train_, std::span<const std::uint64_t>(permutation_).subspan(first, b));
}

// Forward and backward on this thread; each shard's round on a thread of its own, started as soon as
// its gradients are complete (options.overlap) or after backward.
absl::StatusOr<float> Trainer::ComputeAndExchange(std::uint64_t round, std::vector<ShardRun>& runs) {
  SKETCHPS_ASSIGN_OR_RETURN(Batch batch, BatchOf(round));
  const std::uint32_t n = replica_->num_shards();
  std::vector<absl::Notification> ready(n);
  std::atomic<bool> abandon{false};
  const RoundInfo info{round, plan_.EpochOf(round)};
  float* params = model_->flat().params();
  const float* grads = model_->flat().grads();
  std::vector<std::future<ShardRun>> threads;
  for (std::uint32_t s = 0; s < n; ++s) {
    threads.push_back(std::async(std::launch::async, [&, s] {
      ready[s].WaitForNotification();
      ShardRun run;
      if (abandon.load()) return run;
      const absl::Time start = absl::Now();
      run.outcome = replica_->RunShard(s, transport_->aggregator(), info, grads, params);
      run.seconds = absl::ToDoubleSeconds(absl::Now() - start);
      return run;
    }));
  }
  if (o_.overlap) watch_->Arm([&](std::uint32_t s) { ready[s].Notify(); });
  auto loss = model_->ForwardBackward(batch.input, batch.target);
  if (o_.overlap) watch_->Finish();
  abandon.store(!loss.ok());
  if (loss.ok() && o_.dump_rounds.contains(round)) {
    if (auto st = DumpGradient(round); !st.ok()) spdlog::warn("{}", std::string(st.message()));
  }
  for (std::uint32_t s = 0; s < n; ++s) {
    if (!ready[s].HasBeenNotified()) ready[s].Notify();
  }
  for (auto& t : threads) runs.push_back(t.get());
  return loss;
}

absl::StatusOr<nlohmann::json> Trainer::RunRound(std::uint64_t round) {
  const absl::Time start = absl::Now();
  const TransportCounters before = transport_->counters();
  std::vector<ShardRun> runs;
  SKETCHPS_ASSIGN_OR_RETURN(const float loss, ComputeAndExchange(round, runs));
  const absl::Time end = absl::Now();
  std::vector<absl::StatusOr<RoundOutcome>> outcomes;
  double longest = 0;
  for (auto& r : runs) {
    outcomes.push_back(std::move(r.outcome));
    longest = std::max(longest, r.seconds);
  }
  SKETCHPS_ASSIGN_OR_RETURN(ReplicaRound out, replica_->Combine(std::move(outcomes)));
  SKETCHPS_RETURN_IF_ERROR(transport_->CheckReplica(round, shards_, model_->flat().params()));
  // The compute ended when the last shard could start at the latest; the shard threads' own times
  // tell how much of the exchange went on after it.
  const absl::Time computed = std::min(end, std::max(start, end - absl::Seconds(longest)));
  return Record(round, start, computed, end, loss, out, before, runs);
}

nlohmann::json Trainer::Record(std::uint64_t round, absl::Time start, absl::Time computed, absl::Time end, float loss,
                               const ReplicaRound& out, const TransportCounters& before,
                               const std::vector<ShardRun>& runs) const {
  const TransportCounters after = transport_->counters();
  double communicate = 0, local = 0;
  for (std::size_t i = 0; i < after.seconds.size() && i < runs.size(); ++i) {
    const double rpc = after.seconds[i] - before.seconds[i];
    communicate = std::max(communicate, rpc);
    local = std::max(local, std::max(0.0, runs[i].seconds - rpc));
  }
  const bool raw = after.counts_raw;
  return nlohmann::json{{"round", round},
                        {"round_start", UnixSeconds(start)},
                        {"time", UnixSeconds(end)},
                        {"epoch", plan_.EpochOf(round)},
                        {"loss", loss},
                        {"bytes_up", raw ? after.raw_up - before.raw_up : out.traffic.bytes_up},
                        {"bytes_down", raw ? after.raw_down - before.raw_down : out.traffic.bytes_down},
                        {"wire_up", after.wire_up - before.wire_up},
                        {"wire_down", after.wire_down - before.wire_down},
                        {"dense_bytes", 4 * model_->flat().dim()},
                        {"selected", out.selected},
                        {"skipped", out.skipped},
                        {"compute_s", absl::ToDoubleSeconds(computed - start)},
                        {"exchange_s", absl::ToDoubleSeconds(end - computed)},
                        {"compress_s", local},
                        {"communicate_s", communicate},
                        {"workers", plan_.workers}};
}

absl::Status Trainer::Evaluate(std::uint64_t round, bool final, nlohmann::json& record) {
  const absl::Time start = absl::Now();
  const std::uint64_t samples = final ? 0 : o_.job.train.eval_samples;
  SKETCHPS_ASSIGN_OR_RETURN(EvalCounts mine, EvaluateShare(*model_, test_, samples, plan_.rank, plan_.workers));
  SKETCHPS_ASSIGN_OR_RETURN(auto sums, SumOverWorkers(transport_->aggregator(), round, mine.ToVector()));
  const EvalCounts all = EvalCounts::FromVector(sums);
  if (all.samples <= 0) return absl::InternalError(absl::StrCat("round ", round, ": the evaluation covered no sample"));
  record["test_accuracy"] = all.correct / all.samples;
  record["test_loss"] = all.loss_sum / all.samples;
  record["test_round"] = round;
  record["test_samples"] = static_cast<std::uint64_t>(all.samples);
  record["eval_s"] = absl::ToDoubleSeconds(absl::Now() - start);
  if (final) {
    record["final"] = true;
    summary_.final_test_accuracy = all.correct / all.samples;
  }
  spdlog::info("round {} test accuracy {:.4f} (loss {:.4f}, {} images{})", round + 1, all.correct / all.samples,
               all.loss_sum / all.samples, static_cast<std::uint64_t>(all.samples), final ? ", final" : "");
  return absl::OkStatus();
}

absl::Status Trainer::DumpGradient(std::uint64_t round) const {
  const auto& flat = model_->flat();
  GradientDump dump{o_.job.job_id, o_.job.model, plan_.rank, plan_.workers, round, flat.layers(),
                    std::vector<float>(flat.grads(), flat.grads() + flat.dim())};
  std::error_code ec;
  std::filesystem::create_directories(o_.dump_dir, ec);
  const std::string path = (std::filesystem::path(o_.dump_dir) / GradientDumpName(round, plan_.rank)).string();
  SKETCHPS_RETURN_IF_ERROR(WriteGradientDump(path, dump));
  spdlog::info("round {}: gradient written to {}", round, path);
  return absl::OkStatus();
}

void Trainer::SaveSnapshot(std::uint64_t round) {
  Snapshot& snap = snapshots_[round % 2];
  const auto& p = model_->flat();
  snap.round = round;
  snap.params.assign(p.params(), p.params() + p.dim());
  snap.velocity.clear();
  for (std::uint32_t i = 0; i < replica_->num_shards(); ++i) snap.velocity.push_back(replica_->optimizer(i).Velocity());
}

// After round `round` failed: regroup (or return the failure), roll back to the agreed round and
// rebuild what depends on the membership. Returns the round to run next.
absl::StatusOr<std::uint64_t> Trainer::Regroup(const absl::Status& failure, std::uint64_t round) {
  const absl::Time start = absl::Now();
  SKETCHPS_ASSIGN_OR_RETURN(Regrouped g, transport_->Regroup(failure, round));
  const Snapshot& snap = snapshots_[g.round % 2];
  if (snap.round != g.round) {
    return absl::InternalError(absl::StrCat("regroup: the survivors restart at round ", g.round, " but this worker (at round ",
                                            round, ") has no snapshot of it"));
  }
  std::copy(snap.params.begin(), snap.params.end(), model_->flat().params());
  SKETCHPS_ASSIGN_OR_RETURN(plan_, plan_.Continue(o_.job, g.round, g.workers, g.rank));
  const double scale = static_cast<double>(g.workers) / o_.job.workers;
  optimizer_.lr.base_lr = o_.job.optimizer.lr.base_lr * scale;
  optimizer_.lr.min_lr = o_.job.optimizer.lr.min_lr * scale;
  SKETCHPS_ASSIGN_OR_RETURN(replica_, MakeReplica());
  for (std::uint32_t i = 0; i < replica_->num_shards(); ++i) {
    if (!snap.velocity[i].empty()) SKETCHPS_RETURN_IF_ERROR(replica_->optimizer(i).SetVelocity(snap.velocity[i]));
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  regroup_note_ = nlohmann::json{{"epoch", g.epoch}, {"workers", g.workers}, {"lost", g.lost},
                                 {"rounds_redone", round - g.round}, {"seconds", seconds}};
  spdlog::warn("regrouped into epoch {} after {:.1f} s: rank {} of {} (lost {}), restarting at round {} of {} (learning rate x{:.3f})",
               g.epoch, seconds, g.rank, g.workers, g.lost, g.round, plan_.last_round, scale);
  return g.round;
}

absl::StatusOr<TrainSummary> Trainer::Run() {
  spdlog::info("worker {}/{}: {} ({} parameters), scheme {}, rounds {}..{}{}", o_.rank, o_.job.workers, o_.job.model,
               model_->flat().dim(), o_.job.scheme.name, start_round_, plan_.last_round,
               o_.overlap ? ", shards start as their gradients complete" : "");
  if (start_round_ >= plan_.last_round) {
    spdlog::warn("the shards already hold round {} of {}: nothing left to train (a finished job's checkpoints?)",
                 start_round_, plan_.last_round);
  }
  summary_.first_round = start_round_;
  summary_.weights_checksum = WeightsChecksum({model_->flat().params(), model_->flat().dim()});
  std::uint64_t round = start_round_;
  while (round < plan_.last_round) {
    if (can_regroup()) SaveSnapshot(round);
    const bool last = round + 1 == plan_.last_round;
    const std::uint64_t every = o_.job.train.eval_every_rounds;
    auto record = RunRound(round);
    if (record.ok() && (last || (every > 0 && (round + 1) % every == 0))) {
      if (auto st = Evaluate(round, last, *record); !st.ok()) record = st;
    }
    if (!record.ok()) {
      if (!can_regroup()) return record.status();
      SKETCHPS_ASSIGN_OR_RETURN(round, Regroup(record.status(), round));
      continue;
    }
    const auto& p = model_->flat();
    summary_.weights_checksum = WeightsChecksum({p.params(), p.dim()});
    (*record)["checksum"] = absl::StrFormat("%016x", summary_.weights_checksum);
    if (regroup_note_) (*record)["regroup"] = *std::exchange(regroup_note_, std::nullopt);
    if (o_.log_every_rounds > 0 && (round % o_.log_every_rounds == 0 || last)) {
      spdlog::info("round {}/{} loss {:.4f}", round + 1, plan_.last_round, (*record)["loss"].get<double>());
    }
    log_.Write(*record);
    if (o_.metrics) o_.metrics->ObserveRound(*record);
    ++summary_.rounds;
    ++round;
  }
  if (auto st = transport_->Finish(round); !st.ok()) {
    spdlog::warn("could not tell every shard this worker has finished: {}", std::string(st.message()));
  }
  const auto& p = model_->flat();
  summary_.final_workers = plan_.workers;
  summary_.final_weights.assign(p.params(), p.params() + p.dim());
  return summary_;
}

}  // namespace

bool IsReplicaDivergence(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition && absl::StrContains(status.message(), kReplicaDiverged);
}

absl::StatusOr<TrainSummary> Train(const TrainerOptions& options) {
  Trainer trainer(options);
  SKETCHPS_RETURN_IF_ERROR(trainer.Prepare());
  return trainer.Run();
}

}  // namespace sketchps::worker
