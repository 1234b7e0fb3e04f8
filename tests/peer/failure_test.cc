// Failure behaviour of the peer mode: a dead peer makes RunPhase fail with UNAVAILABLE naming it
// within peer_timeout plus slack (never a hang), on its partners and, through abort notices, on
// the others; invalid steps (NaN, wrong dimension, wrong length, another job or epoch) are refused.
#include <thread>

#include <catch2/catch.hpp>

#include "absl/time/clock.h"
#include "common/reason.h"
#include "engine/phase_proto.h"
#include "peer/schedule.h"
#include "peer_group.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

constexpr std::uint64_t kDim = 16;
const absl::Duration kTimeout = absl::Seconds(1);
// Waits at later steps allow 0.5 s per step index (P = 4: up to 1.5 s) for the abort notice of the
// rank that detects the silent peer; plus scheduling noise on a loaded machine.
const absl::Duration kSlack = absl::Seconds(3);

Contribution Dense(float v) { return Contribution{{Reduction::kDenseSum}, DenseValues{std::vector<float>(kDim, v)}}; }

struct Timed {
  absl::StatusOr<std::shared_ptr<const PhaseResult>> result = absl::UnknownError("not run");
  absl::Duration took;
};

// A hand-made step from `sender` to `to` (P = 2: the doubling step is step 1).
v1::ExchangeRequest Step(std::uint32_t sender, const PhaseSpec& spec, const PayloadValue& payload,
                         std::uint64_t round = 0, std::uint32_t step = 1, const std::string& job = "fail") {
  v1::ExchangeRequest r;
  auto* h = r.mutable_header();
  h->set_job_id(job);
  h->set_epoch(0);
  h->set_worker_id(sender);
  h->set_shard_id(0);
  h->set_round(round);
  h->set_phase(0);
  r.set_step(step);
  *r.mutable_spec() = SpecToProto(spec);
  r.set_contributors(1);
  auto* item = r.add_items();
  item->set_origin(sender);
  REQUIRE(EncodeBody(payload, item->mutable_payload()).ok());
  return r;
}

grpc::Status Send(const std::string& address, const v1::ExchangeRequest& request) {
  auto stub = v1::Peer::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  ctx.set_wait_for_ready(true);
  v1::ExchangeResponse response;
  return stub->Exchange(&ctx, request, &response);
}

// Rank 0 runs one phase while the test plays rank 1 and sends `bad`.
struct Injected {
  grpc::Status sent;
  Timed rank0;
};

Injected InjectIntoRank0(const Contribution& own, const v1::ExchangeRequest& bad) {
  PeerGroup group(2, PeerBase("fail", {kDim}, absl::Seconds(10)));
  Injected out;
  const absl::Time t0 = absl::Now();
  std::thread rank0([&] {
    out.rank0.result = group.aggregator(0).RunPhase(0, 0, 0, own);
    out.rank0.took = absl::Now() - t0;
  });
  out.sent = Send(group.addresses()[0], bad);
  rank0.join();
  return out;
}

}  // namespace

TEST_CASE("A dead peer fails the phase with UNAVAILABLE naming it within the timeout", "[peer][grpc][failure]") {
  for (std::uint32_t p : {3u, 4u}) {
    const std::uint32_t dead = p - 1;
    PeerGroup group(p, PeerBase("dead-" + std::to_string(p), {kDim}, kTimeout), {dead});
    std::vector<std::uint32_t> alive;
    for (std::uint32_t r = 0; r + 1 < p; ++r) alive.push_back(r);
    std::vector<Timed> out(p);
    const absl::Time t0 = absl::Now();
    RunRanks(alive, [&](std::uint32_t r) {
      out[r].result = group.aggregator(r).RunPhase(0, 0, 0, Dense(1.0f));
      out[r].took = absl::Now() - t0;
    });
    const std::string name = "rank " + std::to_string(dead) + " (" + group.addresses()[dead] + ")";
    for (std::uint32_t r : alive) {
      INFO("P = " << p << ", rank " << r << " after " << absl::FormatDuration(out[r].took) << ": "
                  << out[r].result.status());
      CHECK(out[r].result.status().code() == absl::StatusCode::kUnavailable);
      CHECK(std::string(out[r].result.status().message()).find(name) != std::string::npos);
      CHECK(out[r].took < kTimeout + kSlack);
    }
  }
}

TEST_CASE("Invalid steps from a peer are refused and fail the receiver's phase at once", "[peer][grpc][failure]") {
  SECTION("NaN values") {
    std::vector<float> v(kDim, 1.0f);
    v[3] = NAN;
    const auto out = InjectIntoRank0(Dense(1.0f), Step(1, {Reduction::kDenseSum}, DenseValues{v}));
    CHECK(out.sent.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(out.sent.error_message().find("dense.values") != std::string::npos);
    CHECK(out.rank0.result.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(out.rank0.result.status().message()).find("rank 1 (") != std::string::npos);
    CHECK(out.rank0.took < absl::Seconds(5));
    // The receiver blames the sender (it evicts it); the sender is told it is evicted.
    CHECK(IsMisbehaved(out.rank0.result.status()));
    CHECK(CulpritOf(out.rank0.result.status()) == 1u);
    CHECK(!IsConfigurationError(out.rank0.result.status()));
    CHECK(out.sent.error_message().find("evicts rank 1") != std::string::npos);
  }
  SECTION("a sparse payload of the wrong dimension") {
    const PhaseSpec spec{Reduction::kSparseSum};
    const Contribution own{spec, SparseVector{kDim, {1}, {2.0f}}};
    const auto out = InjectIntoRank0(own, Step(1, spec, SparseVector{kDim - 1, {1}, {2.0f}}));
    CHECK(out.sent.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(out.sent.error_message().find("sparse.dim") != std::string::npos);
    CHECK(out.rank0.result.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(out.rank0.took < absl::Seconds(5));
  }
  SECTION("a dense payload of another length") {
    const auto out =
        InjectIntoRank0(Dense(1.0f), Step(1, {Reduction::kDenseSum}, DenseValues{std::vector<float>(kDim - 2, 1.0f)}));
    CHECK(out.sent.ok());  // well-formed on its own; the length clash shows when it is combined
    CHECK(out.rank0.result.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(out.rank0.result.status().message()).find("dense.count") != std::string::npos);
    CHECK(out.rank0.took < absl::Seconds(5));
  }
  SECTION("a payload of the wrong kind") {
    const auto out = InjectIntoRank0(Dense(1.0f), Step(1, {Reduction::kDenseSum}, IndexSet{kDim, {1, 2}}));
    CHECK(out.sent.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(out.rank0.result.status().code() == absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("Steps of another job, a newer epoch or a non-partner are refused and not stored", "[peer][grpc][failure]") {
  PeerGroup group(4, PeerBase("fail", {kDim}, kTimeout));
  const PhaseSpec spec{Reduction::kDenseSum};
  const DenseValues ones{std::vector<float>(kDim, 1.0f)};
  auto other_job = Step(1, spec, ones);
  other_job.mutable_header()->set_job_id("other");
  auto newer_epoch = Step(1, spec, ones);  // the sender regrouped first: retryable
  newer_epoch.mutable_header()->set_epoch(7);
  auto not_partner = Step(2, spec, ones);  // at step 1 rank 0 hears from rank 1 only
  CHECK(Send(group.addresses()[0], other_job).error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  const grpc::Status ahead = Send(group.addresses()[0], newer_epoch);
  CHECK(ahead.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK_THAT(ahead.error_message(), Catch::Contains("header.epoch: 7 is ahead"));
  CHECK(Send(group.addresses()[0], not_partner).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(group.server(0).endpoint()->mailbox.HeldLetters(0) == 0);
  // A valid step is stored once, however often it is retried.
  const auto good = Step(1, spec, ones);
  CHECK(Send(group.addresses()[0], good).ok());
  CHECK(Send(group.addresses()[0], good).ok());
  CHECK(group.server(0).endpoint()->mailbox.HeldLetters(0) == 1);
}

TEST_CASE("After a membership change the old epoch is refused", "[peer][grpc][failure]") {
  PeerGroup group(2, PeerBase("fail", {kDim}, kTimeout));
  auto next = PeerBase("fail", {kDim}, kTimeout);
  next.epoch = 1;
  next.num_workers = 2;
  next.rank = 0;
  REQUIRE(group.server(0).Reset(next).ok());
  const auto step = Step(1, {Reduction::kDenseSum}, DenseValues{std::vector<float>(kDim, 1.0f)});
  CHECK(Send(group.addresses()[0], step).error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  auto fresh = step;
  fresh.mutable_header()->set_epoch(1);
  CHECK(Send(group.addresses()[0], fresh).ok());
  CHECK(group.server(0).endpoint()->mailbox.HeldLetters(0) == 1);
}

TEST_CASE("Every rank blames the rank whose letter one of them refused, so all can evict it", "[peer][grpc][failure]") {
  // P = 3: rank 2 folds into a partner at step 0; the test plays rank 2 and sends NaN there.
  PeerGroup group(3, PeerBase("evict", {kDim}, absl::Seconds(10)));
  const std::uint32_t partner = *peer::StepOf(3, 2, 0).send_to;
  std::vector<float> v(kDim, 1.0f);
  v[0] = NAN;
  std::vector<Timed> out(2);
  const absl::Time t0 = absl::Now();
  std::thread ranks([&] {
    RunRanks({0, 1}, [&](std::uint32_t r) {
      out[r].result = group.aggregator(r).RunPhase(0, 0, 0, Dense(1.0f));
      out[r].took = absl::Now() - t0;
    });
  });
  const grpc::Status sent =
      Send(group.addresses()[partner], Step(2, {Reduction::kDenseSum}, DenseValues{v}, 0, 0, "evict"));
  ranks.join();
  CHECK(sent.error_message().find("evicts rank 2") != std::string::npos);
  for (std::uint32_t r : {0u, 1u}) {
    INFO("rank " << r << " after " << absl::FormatDuration(out[r].took) << ": " << out[r].result.status());
    CHECK(IsMisbehaved(out[r].result.status()));  // the partner refused it; the other heard the abort notice
    CHECK(CulpritOf(out[r].result.status()) == 2u);
    CHECK(out[r].took < absl::Seconds(5));
  }
}
