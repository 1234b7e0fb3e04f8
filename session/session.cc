#include "session/session.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/reason.h"
#include "common/status.h"
#include "common/wire/framed_file.h"
#include "kernels/vector_ops.h"
#include "peer/transport.h"
#include "ps/transport.h"
#include "spdlog/spdlog.h"

namespace sketchps::session {
namespace {

double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

std::string Describe(const Layer& l) { return absl::StrCat("'", l.name, "' [", absl::StrJoin(l.shape, ", "), "]"); }

}  // namespace

namespace {

// Drops the records of rounds >= first_round from the JSON-lines file at `path` (and a last line cut
// in the middle); a missing file is fine.
absl::Status KeepRecordsBefore(const std::string& path, std::uint64_t first_round) {
  std::ifstream in(path);
  if (!in) return absl::OkStatus();
  std::string kept, line;
  bool dropped = false;
  while (std::getline(in, line)) {
    const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool keep = in.good() && record.is_object() && record.value("round", first_round) < first_round;
    if (keep) absl::StrAppend(&kept, line, "\n");
    dropped |= !keep;
  }
  return dropped ? WriteFileAtomically(path, kept) : absl::OkStatus();
}

}  // namespace

absl::Status JsonLinesLog::Open(const std::string& path, std::uint64_t first_round) {
  if (path.empty()) return absl::OkStatus();
  WaitForWritesOnTermination();  // a SIGTERM lets the record being written end first
  if (auto st = KeepRecordsBefore(path, first_round); !st.ok()) {
    return absl::UnavailableError(absl::StrCat("--metrics-out: ", st.message()));
  }
  if (auto st = file_.Open(path); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics-out: ", st.message()));
  }
  return absl::OkStatus();
}

absl::Status JsonLinesLog::Append(const nlohmann::json& record) { return file_.Append(record.dump() + "\n"); }

void JsonLinesLog::Write(const nlohmann::json& record) {
  if (auto st = Append(record); !st.ok()) spdlog::error("round record not written: {}", std::string(st.message()));
}

absl::Status CheckLayout(const LayerTable& model, const LayerTable& job) {
  const auto& a = model.layers;
  const auto& b = job.layers;
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i < a.size() && i < b.size() && a[i].name == b[i].name && a[i].shape == b[i].shape) continue;
    return WithReason(absl::InvalidArgumentError(
                          absl::StrCat("the model's parameters differ from the job's layout at parameter ", i,
                                       ": the model has ", i < a.size() ? Describe(a[i]) : "no more parameters",
                                       ", the job ", i < b.size() ? Describe(b[i]) : "no more")),
                      Reason::kModelMismatch);
  }
  return absl::OkStatus();
}

absl::Status AddEvaluation(nlohmann::json& record, std::uint64_t round, double correct, double samples, double loss_sum,
                           double seconds, bool final) {
  if (samples <= 0) return absl::InternalError(absl::StrCat("round ", round, ": the evaluation covered no sample"));
  record["test_accuracy"] = correct / samples;
  record["test_loss"] = loss_sum / samples;
  record["test_round"] = round;
  record["test_samples"] = static_cast<std::uint64_t>(samples);
  record["eval_s"] = seconds;
  if (final) record["final"] = true;
  return absl::OkStatus();
}

absl::Status CheckEvaluationShare(std::uint64_t round, double correct, double samples, double loss_sum) {
  const std::pair<const char*, double> values[] = {{"correct", correct}, {"samples", samples}, {"loss_sum", loss_sum}};
  for (const auto& [name, value] : values) {
    if (std::isfinite(value)) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "evaluation after round ", round + 1, ": this rank's ", name, " is ", value,
        ": the model diverged (its loss is not finite; a smaller learning rate, outer step or more warm-up?)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Session>> Session::Create(const SessionOptions& options, const LayerTable& layers,
                                                         const float* params) {
  std::unique_ptr<Session> s(new Session(options));
  SKETCHPS_RETURN_IF_ERROR(s->CheckOptions());
  if (options.job.layout.layers.empty()) {
    return absl::InvalidArgumentError(
        "layers: the job (model: custom) does not give the model's layout "
        "(`sketchps run --script` adds it; docs/pytorch.md)");
  }
  SKETCHPS_RETURN_IF_ERROR(CheckLayout(layers, options.job.layout));
  s->layers_ = layers;
  if (options.job.decentralized()) {
    s->o_.job.fingerprint["initial_weights"] = s->ParamsChecksum(params);
    // Nothing compares decentralized replicas after a round: peers must round alike (docs/gpu.md).
    s->o_.job.fingerprint[kKernelsKey] = static_cast<std::uint64_t>(kernels::ActiveBackend());
  }
  SKETCHPS_ASSIGN_OR_RETURN(s->shards_, MakeShardMap(layers, options.job.servers));
  SKETCHPS_ASSIGN_OR_RETURN(s->plan_, RoundPlan::Initial(options.job, options.rank));
  if (options.join_at_round && *options.join_at_round >= s->plan_.last_round) {
    return absl::InvalidArgumentError(absl::StrCat("--join-at-round: ", *options.join_at_round,
                                                   " is not before the job's end (", s->plan_.last_round, " rounds)"));
  }
  if (options.leave_at_round > 0) s->plan_.last_round = std::min(s->plan_.last_round, options.leave_at_round);
  s->optimizer_ = options.job.replicated_optimizer();
  SKETCHPS_RETURN_IF_ERROR(s->StartTransport());
  SKETCHPS_ASSIGN_OR_RETURN(s->replica_, s->MakeReplica());
  if (!options.state_dir.empty() && options.job.decentralized()) {
    spdlog::info("worker {}: --state-dir is for ps mode; a decentralized worker keeps no state across restarts",
                 options.rank);
  } else if (!options.state_dir.empty()) {
    s->state_files_ =
        std::make_unique<SchemeStateFiles>(options.state_dir, options.job.job_id, options.rank, layers.dim(),
                                           options.job.checkpoint.every_rounds, options.checkpoint_key);
  }
  return s;
}

bool Session::can_regroup() const {
  return o_.job.decentralized() && o_.job.peer.on_failure == OnPeerFailure::kRegroup;
}

absl::Status Session::CheckOptions() const {
  if (!o_.job.decentralized() && o_.servers.size() != o_.job.servers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--servers: ", o_.servers.size(), " addresses for a job with servers: ", o_.job.servers));
  }
  if (o_.rank >= o_.job.workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rank: ", o_.rank, " is not in [0, workers = ", o_.job.workers, ")"));
  }
  if ((o_.join_at_round || o_.leave_at_round > 0) && !o_.job.ps.elastic) {
    return absl::InvalidArgumentError(absl::StrCat(o_.join_at_round ? "--join-at-round" : "--leave-at-round",
                                                   ": the job's membership is fixed (set ps.elastic: true)"));
  }
  if (o_.join_at_round && o_.rank < o_.job.ps.initial_workers) {
    return absl::InvalidArgumentError(absl::StrCat("--join-at-round: rank ", o_.rank, " is one of the ",
                                                   o_.job.ps.initial_workers,
                                                   " ps.initial_workers, which start the job"));
  }
  if (o_.leave_at_round > 0 && o_.join_at_round && o_.leave_at_round <= *o_.join_at_round) {
    return absl::InvalidArgumentError(
        absl::StrCat("--leave-at-round: ", o_.leave_at_round, " is not after --join-at-round ", *o_.join_at_round));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Replica>> Session::MakeReplica() const {
  SKETCHPS_ASSIGN_OR_RETURN(
      auto replica, Replica::Create(ReplicaOptions{plan_.rank, plan_.workers, shards_, layers_, o_.job.scheme.make,
                                                   o_.job.scheme.density, o_.job.scheme.global_momentum, optimizer_,
                                                   o_.job.train.seed, true, o_.job.ps.round_deadline_seconds > 0}));
  SKETCHPS_RETURN_IF_ERROR(replica->WireStatus());  // its messages would be refused
  return replica;
}

absl::Status Session::StartTransport() {
  const WorkerLink link{o_.job.job_id, o_.rank, o_.job.workers, o_.patience, o_.tls, o_.job.fingerprint};
  if (o_.job.decentralized()) {
    peer::PeerOptions peers;
    static_cast<WorkerLink&>(peers) = link;
    peers.listen = o_.listen;
    peers.peers = o_.peers;
    peers.port_file = o_.port_file;
    peers.peers_file = o_.peers_file;
    peers.peer_timeout = o_.peer_timeout;
    peers.regroup = can_regroup();
    SKETCHPS_ASSIGN_OR_RETURN(transport_, peer::StartPeers(peers, shards_));
  } else {
    ps::ClientOptions client;
    static_cast<WorkerLink&>(client) = link;
    client.servers = o_.servers;
    client.rpc_timeout = o_.rpc_timeout;
    std::optional<std::uint64_t> join;  // elastic: a slot that does not start the job joins it
    if (o_.job.ps.elastic && o_.rank >= o_.job.ps.initial_workers) join = o_.join_at_round.value_or(0);
    SKETCHPS_ASSIGN_OR_RETURN(transport_, ps::ConnectParameterServers(std::move(client), join));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::uint64_t> Session::Join(float* params, WorkerLocalState* local) {
  SKETCHPS_ASSIGN_OR_RETURN(const std::uint64_t first, transport_->Start(layers_, shards_, params, *replica_));
  const bool ahead = transport_->shards_ahead();
  // The first round's record counts its own copies, not the join's (a restored state's are later, once).
  const absl::Cleanup count_from_here = [this] { copied_ = kernels::BytesCopied(); };
  const auto split = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shards disagree on the round: some have applied ", first, " rounds, others ", first + 1,
        " (this worker stopped between them); replaying round ", first, " needs this worker's state of it: ", why));
  };
  if (state_files_ == nullptr) {
    if (ahead) return split("no --state-dir was given");
    return first;
  }
  state_files_->SetLocal(local);
  const auto restored = state_files_->Restore(first, *replica_, params, /*from_file=*/ahead);
  std::uint64_t start = first;
  // A tampered file, or a key that is missing or wrong: the operator must act, not lose the state.
  if (!restored.ok() && IsKeyError(restored.status())) return restored.status();
  if (!restored.ok()) {
    if (ahead) return split(std::string(restored.status().message()));
    spdlog::warn("worker {}: saved state refused, starting round {} with empty scheme state: {}", o_.rank, first,
                 std::string(restored.status().message()));
  } else if (restored->restored) {
    spdlog::info("worker {}: {}{}", o_.rank, restored->note,
                 ahead ? absl::StrCat(" (some shards had applied round ", first, " already)") : "");
    start = restored->first_round;
  } else if (ahead) {
    return split(restored->note);
  } else if (first > 0) {
    spdlog::warn("worker {}: joining at round {} with empty scheme state: {}", o_.rank, first, restored->note);
  }
  state_files_->DiscardAfter(start);
  return start;
}

void Session::AddCopies(nlohmann::json& record) {
  const kernels::CopiedBytes now = kernels::BytesCopied();
  record["copied_to_device"] = now.to_device - copied_.to_device;
  record["copied_to_host"] = now.to_host - copied_.to_host;
  copied_ = now;
}

ShardRun Session::RunShard(std::uint32_t shard, std::uint64_t round, const float* grads, float* params) {
  ShardRun run;
  const absl::Time start = absl::Now();
  // Nothing of this round leaves before the previous round's state file is complete
  // (session/scheme_state_file.h); a failed one stops the round with stop_on_state_error.
  if (auto saved = StateSaved(); !saved.ok()) {
    run.outcome = saved;
    return run;
  }
  run.outcome =
      replica_->RunShard(shard, transport_->aggregator(), RoundInfo{round, plan_.EpochOf(round)}, grads, params);
  run.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return run;
}

absl::StatusOr<nlohmann::json> Session::Step(std::uint64_t round, float loss, const float* grads, float* params,
                                             absl::Duration compute) {
  if (round >= plan_.last_round) {
    return absl::FailedPreconditionError(absl::StrCat("round ", round, ": the job has ", plan_.last_round, " rounds"));
  }
  const absl::Time now = absl::Now();
  RoundFlight flight = StartRound(round, grads, params);
  return Complete(round, loss, Land(flight, now - compute), params);
}

RoundFlight Session::StartRound(std::uint64_t round, const float* grads, float* params) {
  RoundFlight flight{transport_->counters(), nullptr};
  flight.shards = std::make_unique<ShardThreads<ShardRun>>(
      num_shards(), [=, this](std::uint32_t s) { return RunShard(s, round, grads, params); });
  return flight;
}

RoundRuns Session::Land(RoundFlight& flight, absl::Time start, bool abandon) {
  RoundRuns runs{start, absl::InfinitePast(), flight.before, {}};
  runs.shards = flight.shards->Wait(abandon);
  const absl::Time end = absl::Now();
  double longest = 0;
  for (const auto& r : runs.shards) longest = std::max(longest, r.seconds);
  // The compute ended when the last shard could start at the latest; the shard threads' own times
  // tell how much of the exchange went on after it.
  runs.computed = std::min(end, std::max(start, end - absl::Seconds(longest)));
  return runs;
}

namespace {

// The recovery figures of a compressed round (docs/methods.md "Recovery diagnostics"): norms always,
// the comparison with the exact sum under scheme.diagnostics. Nothing for dense or skipped rounds.
void AddDiagnostics(const RoundDiagnostics& d, nlohmann::json& record) {
  if (d.floor_not_held > 0) {  // the recovery floor's verdict, in any round (tools/recovery_watch.h)
    record["floor_not_held"] = d.floor_not_held;
    record["floor_growth"] = d.floor_growth;
  }
  if (!d.compressed) return;
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  record["input_norm"] = std::sqrt(d.input_sq);
  if (d.has_residual) {
    record["residual_norm"] = std::sqrt(d.residual_sq);
    record["sent_share"] = 1.0 - ratio(d.residual_sq, d.input_sq);
  }
  if (!d.exact) return;
  record["recovered_share"] = ratio(d.returned_sq, d.exact_sq);
  record["best_share"] = ratio(d.best_sq, d.exact_sq);
  record["hit_rate"] = ratio(static_cast<double>(d.hits), static_cast<double>(d.k));
  if (d.has_candidates) {
    record["candidate_hit_rate"] = ratio(static_cast<double>(d.candidate_hits), static_cast<double>(d.k));
  }
}

}  // namespace

absl::StatusOr<nlohmann::json> Session::Complete(std::uint64_t round, float loss, RoundRuns runs, const float* params) {
  const absl::Time end = absl::Now();
  const absl::Time start = runs.start, computed = runs.computed;
  const TransportCounters& before = runs.before;
  std::vector<absl::StatusOr<RoundOutcome>> outcomes;
  for (auto& r : runs.shards) outcomes.push_back(std::move(r.outcome));
  SKETCHPS_ASSIGN_OR_RETURN(ReplicaRound out, replica_->Combine(std::move(outcomes)));
  SKETCHPS_RETURN_IF_ERROR(transport_->CheckReplica(round, shards_, params));
  const absl::Time saving = absl::Now();
  if (state_files_ != nullptr && (round + 1) % std::max<std::uint64_t>(1, o_.state_every_rounds) == 0) {
    SaveState(round + 1, params);
  }
  const double state_seconds = absl::ToDoubleSeconds(absl::Now() - saving);
  const TransportCounters after = transport_->counters();
  double communicate = 0, local = 0;
  for (std::size_t i = 0; i < after.seconds.size() && i < runs.shards.size(); ++i) {
    const double rpc = after.seconds[i] - before.seconds[i];
    communicate = std::max(communicate, rpc);
    local = std::max(local, std::max(0.0, runs.shards[i].seconds - rpc));
  }
  nlohmann::json record = Record(round, {start, computed, end}, before, after, out, params);
  record["loss"] = loss;
  record["compress_s"] = local;
  record["communicate_s"] = communicate;
  if (state_files_ != nullptr) record["state_s"] = state_seconds;
  AddDiagnostics(out.diagnostics, record);
  AddCopies(record);
  return record;
}

nlohmann::json Session::Record(std::uint64_t round, RoundTimes t, const TransportCounters& before,
                               const TransportCounters& after, const ReplicaRound& out, const float* params) const {
  const bool raw = after.counts_raw;
  nlohmann::json record{{"round", round},
                        {"round_start", UnixSeconds(t.start)},
                        {"time", UnixSeconds(t.end)},
                        {"epoch", plan_.EpochOf(round)},
                        {"bytes_up", after.wire_up - before.wire_up},
                        {"bytes_down", after.wire_down - before.wire_down},
                        {"payload_up", raw ? after.raw_up - before.raw_up : out.traffic.bytes_up},
                        {"payload_down", raw ? after.raw_down - before.raw_down : out.traffic.bytes_down},
                        {"dense_bytes", 4 * dim()},
                        {"selected", out.selected},
                        {"skipped", out.skipped},
                        {"left_out", out.left_out},
                        {"compute_s", absl::ToDoubleSeconds(t.computed - t.start)},
                        {"exchange_s", absl::ToDoubleSeconds(t.end - t.computed)},
                        {"workers", plan_.workers},
                        {"checksum", absl::StrFormat("%016x", ParamsChecksum(params))}};
  if (o_.job.ps.elastic) record["members"] = Members();
  return record;
}

std::vector<std::uint32_t> Session::Members() const {
  const std::vector<std::uint32_t> absent = transport_->round_absent();
  std::vector<std::uint32_t> members;
  for (std::uint32_t w = 0; w < o_.job.workers; ++w) {
    if (!std::binary_search(absent.begin(), absent.end(), w)) members.push_back(w);
  }
  return members;
}

std::pair<std::uint32_t, std::uint32_t> Session::EvalShare() const {
  if (!o_.job.ps.elastic) return {plan_.rank, plan_.workers};
  const std::vector<std::uint32_t> members = Members();
  const auto at = std::lower_bound(members.begin(), members.end(), o_.rank);
  return {static_cast<std::uint32_t>(at - members.begin()), static_cast<std::uint32_t>(members.size())};
}

bool Session::Behind(std::uint64_t round) const {
  for (std::uint32_t s = 0; s < num_shards(); ++s) {
    if (transport_->shard_rounds(s) <= round) return false;
  }
  return num_shards() > 0;
}

absl::StatusOr<nlohmann::json> Session::CatchUp(std::uint64_t round, float* params) {
  const absl::Time start = absl::Now();
  const TransportCounters before = transport_->counters();
  std::vector<absl::StatusOr<RoundOutcome>> outcomes;
  for (std::uint32_t s = 0; s < num_shards(); ++s) {
    outcomes.push_back(
        replica_->FetchShard(s, transport_->aggregator(), RoundInfo{round, plan_.EpochOf(round)}, params));
  }
  SKETCHPS_ASSIGN_OR_RETURN(ReplicaRound out, replica_->Combine(std::move(outcomes)));
  SKETCHPS_RETURN_IF_ERROR(transport_->CheckReplica(round, shards_, params));
  if (state_files_ != nullptr && (round + 1) % std::max<std::uint64_t>(1, o_.state_every_rounds) == 0) {
    SaveState(round + 1, params);
  }
  const TransportCounters after = transport_->counters();
  const absl::Time end = absl::Now();
  nlohmann::json record = Record(round, {start, start, end}, before, after, out, params);  // no compute
  record["compress_s"] = 0.0;
  record["communicate_s"] = absl::ToDoubleSeconds(end - start);
  record["caught_up"] = true;
  AddCopies(record);
  return record;
}

void Session::SaveState(std::uint64_t rounds_applied, const float* params) {
  state_files_->SaveAsync(rounds_applied, *replica_, params);
}

absl::Status Session::StateSaved() {
  if (state_files_ == nullptr) return absl::OkStatus();
  absl::Status saved = state_files_->WaitSaved();
  // Without stop_on_state_error a state file that cannot be written costs a restart its state, not
  // the job its progress (the writer has logged it).
  if (saved.ok() || !o_.stop_on_state_error) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("worker ", o_.rank, ": its state was not saved: ", saved.message()));
}

absl::StatusOr<std::vector<float>> Session::SumOverWorkers(std::uint64_t round, std::vector<float> values) {
  return sketchps::SumOverWorkers(transport_->aggregator(), round, std::move(values));
}

std::uint64_t Session::ParamsChecksum(const float* params) const {
  const kernels::Exec exec{nullptr, &scratch_};
  return kernels::Checksum(params, layers_.dim(), exec).value();  // fails only for a null pointer
}

void Session::RememberRoundStart(std::uint64_t round, const float* params) {
  if (!can_regroup()) return;
  RoundStart& start = starts_[round % 2];
  start.round = ~0ull;  // valid once both copies are made: a failed one leaves no snapshot of `round`
  const kernels::Exec exec{nullptr, &scratch_};
  if (start.params.size() != dim()) start.params = kernels::DeviceArray<float>(dim());
  absl::Status copied = kernels::Copy(params, start.params.data(), dim(), exec);
  start.optimizer_state.resize(num_shards());
  for (std::uint32_t i = 0; i < num_shards() && copied.ok(); ++i) {
    const Optimizer& optimizer = replica_->optimizer(i);
    kernels::DeviceArray<float>& kept = start.optimizer_state[i];
    if (kept.size() != optimizer.state_size()) kept = kernels::DeviceArray<float>(optimizer.state_size());
    copied = kernels::Copy(optimizer.state_data(), kept.data(), kept.size(), exec);
  }
  if (copied.ok()) {
    start.round = round;
  } else {  // a regroup to this round then fails naming the missing snapshot (Recover)
    spdlog::warn("worker {}: round {}'s start was not kept for a regroup: {}", o_.rank, round,
                 std::string(copied.message()));
  }
}

absl::StatusOr<Regrouped> Session::Recover(const absl::Status& failure, std::uint64_t round, float* params,
                                           nlohmann::json* note) {
  if (!can_regroup()) return failure;
  const absl::Time began = absl::Now();
  SKETCHPS_ASSIGN_OR_RETURN(Regrouped g, transport_->Regroup(failure, round));
  const RoundStart& start = starts_[g.round % 2];
  if (start.round != g.round) {
    return absl::InternalError(absl::StrCat("regroup: the survivors restart at round ", g.round,
                                            " but this worker (at round ", round, ") has no snapshot of it"));
  }
  SKETCHPS_ASSIGN_OR_RETURN(plan_, plan_.Continue(o_.job, g.round, g.workers, g.rank));
  // The global batch shrank. With local steps the workers' inner steps keep their own batch and the
  // outer step applies a mean: neither learning rate changes.
  const double scale = o_.job.local_steps() ? 1.0 : static_cast<double>(g.workers) / o_.job.workers;
  optimizer_.lr.base_lr = o_.job.replicated_optimizer().lr.base_lr * scale;
  optimizer_.lr.min_lr = o_.job.replicated_optimizer().lr.min_lr * scale;
  SKETCHPS_ASSIGN_OR_RETURN(replica_, MakeReplica());
  const kernels::Exec exec{nullptr, &scratch_};
  SKETCHPS_RETURN_IF_ERROR(kernels::Copy(start.params.data(), params, dim(), exec));
  for (std::uint32_t i = 0; i < num_shards(); ++i) {
    const kernels::DeviceArray<float>& kept = start.optimizer_state[i];
    SKETCHPS_RETURN_IF_ERROR(replica_->optimizer(i).SetStateFrom(kept.data(), kept.size()));
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - began);
  if (note != nullptr) {
    *note = nlohmann::json{{"epoch", g.epoch},
                           {"workers", g.workers},
                           {"lost", g.lost},
                           {"rounds_redone", round - g.round},
                           {"seconds", seconds}};
  }
  spdlog::warn(
      "regrouped into epoch {} after {:.1f} s: rank {} of {} (lost {}), restarting at round {} of {} (learning rate "
      "x{:.3f})",
      g.epoch, seconds, g.rank, g.workers, g.lost, g.round, plan_.last_round, scale);
  return g;
}

absl::Status Session::Finish(std::uint64_t rounds_applied) { return transport_->Finish(rounds_applied); }

absl::Status Session::ReportFailure(std::uint64_t rounds_applied, const std::string& reason) {
  return transport_->ReportFailure(rounds_applied, reason);
}

}  // namespace sketchps::session
