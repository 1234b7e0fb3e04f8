#include "peer/service.h"

#include "absl/strings/str_cat.h"
#include "common/net/grpc_edge.h"
#include "common/reason.h"
#include "common/status.h"
#include "engine/phase_proto.h"
#include "peer/partial_proto.h"
#include "peer/schedule.h"

namespace sketchps::peer {
namespace {

constexpr std::size_t kMaxAbortMessage = 2000;

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

absl::Status CheckHeader(const PeerConfig& c, const v1::PayloadHeader& h) {
  if (h.job_id() != c.job_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("header.job_id: '", h.job_id(), "' is not this job ('", c.job_id, "')"));
  }
  if (h.epoch() > c.epoch) {  // the sender regrouped first: retryable until this worker has too
    return absl::UnavailableError(absl::StrCat("header.epoch: ", h.epoch(), " is ahead of this worker's epoch ",
                                               c.epoch, " (it is still regrouping)"));
  }
  if (h.epoch() != c.epoch) {
    return absl::FailedPreconditionError(
        absl::StrCat("header.epoch: ", h.epoch(), " is not the current epoch ", c.epoch));
  }
  if (h.worker_id() >= c.num_workers || h.worker_id() == c.rank) {
    return Invalid("header.worker_id",
                   absl::StrCat(h.worker_id(), " is not a peer of rank ", c.rank, " (", c.num_workers, " workers)"));
  }
  if (h.shard_id() >= c.range_lengths.size()) {
    return Invalid("header.shard_id", absl::StrCat(h.shard_id(), " >= ", c.range_lengths.size(), " shards"));
  }
  if (h.phase() >= kMaxPhases) return Invalid("header.phase", absl::StrCat(h.phase(), " >= ", kMaxPhases));
  return absl::OkStatus();
}

absl::Status FileAbort(Endpoint& e, const PhaseRef& ref, const v1::ExchangeRequest& r) {
  if (r.abort_code() <= 0 || r.abort_code() > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return Invalid("abort_code", absl::StrCat(r.abort_code(), " is not a status code"));
  }
  const std::string why = r.abort_message().substr(0, kMaxAbortMessage);
  absl::Status notice = PeerAbortStatus(static_cast<absl::StatusCode>(r.abort_code()),
                                        absl::StrCat("rank ", r.header().worker_id(), " abandoned the phase: ", why));
  if (r.has_evict_rank()) {
    if (r.evict_rank() >= e.config.num_workers) {
      return Invalid("evict_rank", absl::StrCat(r.evict_rank(), " >= ", e.config.num_workers, " workers"));
    }
    // The sender refused a letter of that rank: so does this one (docs/protocol.md "Eviction").
    notice = WithCulprit(WithReason(std::move(notice), Reason::kMisbehaved), r.evict_rank());
  }
  (void)e.mailbox.Abort(ref, std::move(notice));
  return absl::OkStatus();
}

// A sender is at most one phase ahead of this rank, so it holds at most two phases' worth of the
// steps in which this rank hears from it.
std::size_t SenderCap(const PeerConfig& c, std::uint32_t sender) {
  std::size_t steps = 0;
  for (std::uint32_t s = 0; s < NumSteps(c.num_workers); ++s) {
    if (StepOf(c.num_workers, c.rank, s).recv_from == sender) ++steps;
  }
  return 2 * steps;
}

absl::StatusOr<Letter> Open(const PeerConfig& c, const v1::ExchangeRequest& r) {
  const std::uint32_t sender = r.header().worker_id();
  const std::uint64_t range_len = c.range_lengths[r.header().shard_id()];
  Letter letter;
  letter.sender = sender;
  letter.wire_bytes = r.ByteSizeLong();
  SKETCHPS_ASSIGN_OR_RETURN(letter.spec, SpecFromProto(r.spec(), c.num_workers, range_len));
  const Collective collective = CollectiveFor(letter.spec, c.sparse_tree_merge);
  SKETCHPS_ASSIGN_OR_RETURN(
      letter.partial, DecodePartial(r, collective, letter.spec, SentBlock(c.num_workers, sender, r.step()), range_len));
  return letter;
}

}  // namespace

Endpoint::Endpoint(PeerConfig c)
    : config(std::move(c)),
      mailbox(static_cast<std::uint32_t>(config.range_lengths.size()), 2 * NumSteps(config.num_workers) + 2) {}

absl::Status Receive(Endpoint& e, const v1::ExchangeRequest& r, const std::optional<Identity>& caller) {
  const PeerConfig& c = e.config;
  SKETCHPS_RETURN_IF_ERROR(CheckHeader(c, r.header()));
  SKETCHPS_RETURN_IF_ERROR(CheckWorker(caller, c.IdentityOf(r.header().worker_id()), "header.worker_id"));
  const PhaseRef ref{r.header().shard_id(), r.header().round(), r.header().phase()};
  if (r.abort_code() != 0) return FileAbort(e, ref, r);
  const std::uint32_t sender = r.header().worker_id();
  if (r.step() >= NumSteps(c.num_workers) || StepOf(c.num_workers, c.rank, r.step()).recv_from != sender) {
    return Invalid("step", absl::StrCat("rank ", sender, " does not send to rank ", c.rank, " at step ", r.step()));
  }
  const std::size_t cap = SenderCap(c, sender);
  auto letter = Open(c, r);
  if (letter.ok()) return e.mailbox.Put(ref, r.step(), *std::move(letter), cap);
  // A letter from an authenticated rank that fails validation: this rank's phase fails naming the
  // sender, which is evicted (the survivors regroup without it); the sender is told so.
  Letter refused;
  refused.sender = sender;
  refused.rejected = WithCulprit(
      WithReason(Annotate(letter.status(), absl::StrCat("invalid step ", r.step())), Reason::kMisbehaved), sender);
  (void)e.mailbox.Put(ref, r.step(), std::move(refused), cap);
  return WithReason(Annotate(letter.status(), absl::StrCat("rank ", c.rank, " refused this letter and evicts rank ",
                                                           sender, " from the job")),
                    Reason::kEvicted);
}

grpc::Status PeerService::Exchange(grpc::ServerContext* context, const v1::ExchangeRequest* request,
                                   v1::ExchangeResponse*) {
  auto caller = CallerIdentity(*context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return ToGrpcStatus(Receive(*endpoint(), *request, *caller));
}

grpc::Status PeerService::Regroup(grpc::ServerContext* context, const v1::RegroupRequest* request,
                                  v1::RegroupResponse* response) {
  auto caller = CallerIdentity(*context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  auto plan = regrouper_.Handle(*request, *caller);
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  response->set_epoch(plan->epoch);
  response->set_round(plan->round);
  for (std::uint32_t m : plan->members) response->add_members(m);
  return grpc::Status::OK;
}

grpc::Status PeerService::Probe(grpc::ServerContext* context, const v1::ProbeRequest* request,
                                v1::ProbeResponse* response) {
  if (auto caller = CallerIdentity(*context); !caller.ok()) return ToGrpcStatus(caller.status());
  const std::shared_ptr<Endpoint> e = endpoint();
  if (request->job_id() != e->config.job_id) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("job_id: '", request->job_id(), "' is not this job ('", e->config.job_id, "')"));
  }
  response->set_epoch(e->config.epoch);
  FingerprintToProto(e->config.fingerprint, response->mutable_fingerprint());
  return grpc::Status::OK;
}

std::shared_ptr<Endpoint> PeerService::endpoint() const {
  absl::MutexLock lock(&mu_);
  return endpoint_;
}

void PeerService::Reset(std::shared_ptr<Endpoint> endpoint) {
  absl::MutexLock lock(&mu_);
  endpoint_ = std::move(endpoint);
}

absl::StatusOr<std::unique_ptr<PeerServer>> PeerServer::Start(const std::string& listen, PeerConfig config) {
  SKETCHPS_RETURN_IF_ERROR(ValidatePeerConfig(config));
  const int max_bytes = config.MessageLimit();
  SKETCHPS_ASSIGN_OR_RETURN(auto credentials, MakeServerCredentials(config.tls));
  std::unique_ptr<PeerServer> server(new PeerServer(std::make_shared<Endpoint>(std::move(config))));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, credentials, &server->port_);
  ServerOptions options;
  options.max_message_bytes = max_bytes;
  ConfigureServer(builder, options);
  builder.RegisterService(&server->service_);
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("peer server: cannot listen on '", listen, "'"));
  }
  return server;
}

PeerServer::~PeerServer() { Shutdown(absl::ZeroDuration()); }

absl::Status PeerServer::Reset(PeerConfig config) {
  SKETCHPS_RETURN_IF_ERROR(ValidatePeerConfig(config));
  service_.Reset(std::make_shared<Endpoint>(std::move(config)));
  return absl::OkStatus();
}

void PeerServer::Shutdown(absl::Duration grace) {
  if (server_) {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    server_->Wait();
    server_.reset();
  }
}

}  // namespace sketchps::peer
