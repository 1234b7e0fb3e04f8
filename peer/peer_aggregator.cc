#include "peer/peer_aggregator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/net/grpc_edge.h"
#include "common/reason.h"
#include "common/status.h"
#include "engine/phase_proto.h"
#include "peer/partial_proto.h"
#include "peer/schedule.h"

namespace sketchps::peer {
namespace {

// One abort notice in flight.
struct AbortCall {
  grpc::ClientContext context;
  v1::ExchangeRequest request;
  v1::ExchangeResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::ExchangeResponse>> reader;
};

constexpr absl::Duration kAbortDeadline = absl::Seconds(1);
// Extra wait per step index: a rank that waits at step s on a partner that is itself stuck at an
// earlier step (on the silent peer) hears that partner's abort notice, with the real cause, before
// its own wait ends.
constexpr absl::Duration kStepGrace = absl::Milliseconds(500);

}  // namespace

struct PeerAggregator::ShardState {
  explicit ShardState(std::uint64_t dim) : reducer(dim) {}
  Reducer reducer;
  std::shared_ptr<const PhaseResult> previous;  // the last completed phase of this shard
  PhaseRef previous_ref;
  std::atomic<std::uint64_t> wire_up{0}, wire_down{0}, raw_up{0}, raw_down{0}, messages{0};
  std::atomic<std::int64_t> nanos{0};
  void AddTime(absl::Duration d) { nanos.fetch_add(absl::ToInt64Nanoseconds(d)); }
};

absl::StatusOr<std::unique_ptr<PeerAggregator>> PeerAggregator::Create(std::shared_ptr<Endpoint> endpoint,
                                                                       std::vector<std::string> peers) {
  if (endpoint == nullptr) return absl::InvalidArgumentError("peer aggregator: no endpoint");
  const PeerConfig& c = endpoint->config;
  SKETCHPS_RETURN_IF_ERROR(ValidatePeerConfig(c));
  if (peers.size() != c.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("peers: ", peers.size(), " addresses for ", c.num_workers, " workers"));
  }
  SKETCHPS_ASSIGN_OR_RETURN(auto credentials, MakeChannelCredentials(c.tls));
  std::unique_ptr<PeerAggregator> agg(new PeerAggregator(std::move(endpoint)));
  for (std::uint32_t r = 0; r < peers.size(); ++r) {
    if (peers[r].find(':') == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("peers[", r, "]: '", peers[r], "' is not host:port"));
    }
    PeerLink link{peers[r], nullptr};
    if (r != c.rank) {
      auto channel = MakeClientChannel(peers[r], c.MessageLimit(), credentials, c.ExpectedName(r));
      channel->GetState(/*try_to_connect=*/true);  // connect early: abort notices do not wait
      link.stub = v1::Peer::NewStub(channel);
    }
    agg->links_.push_back(std::move(link));
  }
  for (std::uint64_t len : c.range_lengths) agg->shards_.push_back(std::make_unique<ShardState>(len));
  return agg;
}

PeerAggregator::PeerAggregator(std::shared_ptr<Endpoint> endpoint) : endpoint_(std::move(endpoint)) {}

absl::Status PeerAggregator::CheckPeers(absl::Duration timeout) {
  for (std::uint32_t r = 0; r < links_.size(); ++r) {
    if (links_[r].stub == nullptr) continue;  // this rank
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    ctx.set_wait_for_ready(true);
    v1::ProbeRequest request;
    request.set_job_id(config().job_id);
    v1::ProbeResponse response;
    const absl::Status st = FromGrpcStatus(links_[r].stub->Probe(&ctx, request, &response));
    if (!st.ok()) return Annotate(st, Name(r));
    SKETCHPS_RETURN_IF_ERROR(
        CheckFingerprint(config().fingerprint, FingerprintFromProto(response.fingerprint()), Name(r)));
  }
  return absl::OkStatus();
}
PeerAggregator::~PeerAggregator() = default;

std::string PeerAggregator::Name(std::uint32_t rank) const {
  return absl::StrCat("rank ", rank, " (", links_.at(rank).address, ")");
}

v1::ExchangeRequest PeerAggregator::Header(const PhaseRef& ref) const {
  v1::ExchangeRequest request;
  auto* h = request.mutable_header();
  h->set_job_id(config().job_id);
  h->set_epoch(config().epoch);
  h->set_worker_id(config().rank);
  h->set_shard_id(ref.shard);
  h->set_round(ref.round);
  h->set_phase(ref.phase);
  return request;
}

absl::StatusOr<std::shared_ptr<const PhaseResult>> PeerAggregator::RunPhase(std::uint32_t shard, std::uint64_t round,
                                                                            std::uint32_t phase,
                                                                            Contribution contribution) {
  if (shard >= shards_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("shard ", shard, ": the job has ", shards_.size(), " shards"));
  }
  ShardState& st = *shards_[shard];
  const PhaseRef ref{shard, round, phase};
  endpoint_->mailbox.Begin(ref);
  auto result = RunCollective(st, ref, contribution);
  if (!result.ok()) {
    if (!IsPeerAbort(result.status())) AbortPeers(ref, result.status());
    return Annotate(result.status(),
                    absl::StrCat("peer ", CollectiveName(CollectiveFor(contribution.spec, config().sparse_tree_merge)),
                                 " of shard ", shard, " round ", round, " phase ", phase, " on rank ", config().rank));
  }
  st.previous = std::make_shared<const PhaseResult>(*std::move(result));
  st.previous_ref = ref;
  return st.previous;
}

absl::StatusOr<PhaseResult> PeerAggregator::RunCollective(ShardState& st, const PhaseRef& ref,
                                                          const Contribution& own) {
  const PeerConfig& c = config();
  const Collective collective = CollectiveFor(own.spec, c.sparse_tree_merge);
  SKETCHPS_ASSIGN_OR_RETURN(Partial state, LeafPartial(collective, own, c.rank));
  for (const Step& step : Schedule(c.num_workers, c.rank)) {
    if (step.send_to) {
      v1::ExchangeRequest request = Header(ref);
      request.set_step(step.index);
      *request.mutable_spec() = SpecToProto(own.spec);
      SKETCHPS_RETURN_IF_ERROR(EncodePartial(state, &request, own.values));
      st.raw_up.fetch_add(RawPartialBytes(state));
      st.messages.fetch_add(1);
      SKETCHPS_RETURN_IF_ERROR(Send(st, *step.send_to, request));
    }
    if (!step.recv_from) continue;
    SKETCHPS_ASSIGN_OR_RETURN(Letter letter, Receive(st, ref, step.index, *step.recv_from, own.spec));
    if (step.replace) {
      state = std::move(letter.partial);
      continue;
    }
    auto combined = step.received_first
                        ? Combine(collective, own.spec, std::move(letter.partial), std::move(state), st.reducer)
                        : Combine(collective, own.spec, std::move(state), std::move(letter.partial), st.reducer);
    if (!combined.ok()) {
      return Annotate(combined.status(), absl::StrCat(Name(*step.recv_from), " step ", step.index));
    }
    state = *std::move(combined);
  }
  const bool chained = st.previous && st.previous_ref.shard == ref.shard && st.previous_ref.round == ref.round &&
                       st.previous_ref.phase + 1 == ref.phase;
  return FinishPartial(collective, own.spec, std::move(state), own, c.rank, c.num_workers,
                       chained ? st.previous.get() : nullptr, st.reducer);
}

absl::Status PeerAggregator::Send(ShardState& st, std::uint32_t to, const v1::ExchangeRequest& request) {
  const absl::Duration timeout = config().peer_timeout;
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  const std::uint64_t bytes = request.ByteSizeLong();
  Backoff backoff(absl::Milliseconds(20), absl::Milliseconds(500), timeout);
  for (;;) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    ctx.set_wait_for_ready(true);
    v1::ExchangeResponse response;
    st.wire_up.fetch_add(bytes);
    const absl::Status s = FromGrpcStatus(links_[to].stub->Exchange(&ctx, request, &response));
    if (s.ok()) break;
    if (IsTransient(s) && s.code() != absl::StatusCode::kDeadlineExceeded && backoff.Wait()) continue;
    st.AddTime(absl::Now() - start);
    if (IsTransient(s)) {
      return absl::UnavailableError(absl::StrCat(Name(to), " did not accept step ", request.step(), " within ",
                                                 absl::FormatDuration(timeout), " (", s.message(), ")"));
    }
    return Annotate(s, absl::StrCat(Name(to), " refused step ", request.step()));
  }
  st.AddTime(absl::Now() - start);
  return absl::OkStatus();
}

absl::StatusOr<Letter> PeerAggregator::Receive(ShardState& st, const PhaseRef& ref, std::uint32_t step,
                                               std::uint32_t from, const PhaseSpec& spec) {
  const absl::Duration timeout = config().peer_timeout;
  const absl::Time start = absl::Now();
  const absl::Duration grace = std::min(kStepGrace, timeout) * static_cast<std::int64_t>(step);
  auto letter = endpoint_->mailbox.Take(ref, step, start + timeout + grace);
  st.AddTime(absl::Now() - start);
  if (!letter.ok()) {
    const absl::Status& s = letter.status();
    if (IsPeerAbort(s)) return s;
    if (s.code() == absl::StatusCode::kDeadlineExceeded) {
      return absl::UnavailableError(
          absl::StrCat(Name(from), " sent nothing for step ", step, " within ", absl::FormatDuration(timeout + grace)));
    }
    return Annotate(s, Name(from));
  }
  if (!(letter->spec == spec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(from), " step ", step, ": spec (", ReductionName(letter->spec.reduction), ", keep ", letter->spec.keep,
        ") differs from this rank's (", ReductionName(spec.reduction), ", keep ", spec.keep, ")"));
  }
  st.wire_down.fetch_add(letter->wire_bytes);
  st.raw_down.fetch_add(RawPartialBytes(letter->partial));
  return letter;
}

void PeerAggregator::AbortPeers(const PhaseRef& ref, const absl::Status& why) {
  // All notices at once on one completion queue; each call is bounded by kAbortDeadline and does not
  // wait for a peer that is not connected.
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<AbortCall>> calls;
  const absl::Time deadline = absl::Now() + std::min(kAbortDeadline, config().peer_timeout);
  for (std::uint32_t r = 0; r < links_.size(); ++r) {
    if (r == config().rank) continue;
    auto call = std::make_unique<AbortCall>();
    call->request = Header(ref);
    call->request.set_abort_code(static_cast<int>(why.code()));
    call->request.set_abort_message(std::string(why.message()));
    // The rank to evict: the one whose letter this rank refused, or this rank itself when a peer
    // refused its letter (so that every peer hears the culprit, whichever notice comes first).
    if (const auto culprit = CulpritOf(why); culprit && IsMisbehaved(why)) {
      call->request.set_evict_rank(*culprit);
    } else if (IsEvicted(why)) {
      call->request.set_evict_rank(config().rank);
    }
    call->context.set_deadline(absl::ToChronoTime(deadline));
    call->reader = links_[r].stub->AsyncExchange(&call->context, call->request, &cq);
    call->reader->Finish(&call->response, &call->status, call.get());
    calls.push_back(std::move(call));
  }
  for (std::size_t done = 0; done < calls.size(); ++done) {
    void* tag = nullptr;
    bool ok = false;
    if (!cq.Next(&tag, &ok)) break;
  }
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
}

PeerCounters PeerAggregator::counters() const {
  PeerCounters out;
  for (const auto& s : shards_) {
    PeerShardCounters c{s->wire_up.load(),  s->wire_down.load(),
                        s->raw_up.load(),   s->raw_down.load(),
                        s->messages.load(), absl::ToDoubleSeconds(absl::Nanoseconds(s->nanos.load()))};
    out.wire_up += c.wire_up;
    out.wire_down += c.wire_down;
    out.raw_up += c.raw_up;
    out.raw_down += c.raw_down;
    out.messages += c.messages;
    out.shards.push_back(c);
  }
  return out;
}

}  // namespace sketchps::peer
