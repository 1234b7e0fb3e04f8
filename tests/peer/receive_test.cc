// The peer service's validation without gRPC (Receive on an endpoint): malformed partial states are
// INVALID_ARGUMENT naming the field and fail the local phase at once; nothing is stored for header
// errors.
#include <catch2/catch.hpp>

#include "absl/time/clock.h"
#include "engine/phase_proto.h"
#include "peer/service.h"

using namespace sketchps;
using namespace sketchps::peer;

namespace {

constexpr std::uint64_t kDim = 8;

PeerConfig Config() {
  PeerConfig c;
  c.job_id = "recv";
  c.rank = 0;
  c.num_workers = 4;
  c.range_lengths = {kDim};
  return c;
}

// Rank 1's doubling step 1 to rank 0 (P = 4), a sparse all-gather with one item from rank 1.
v1::ExchangeRequest SparseStep() {
  v1::ExchangeRequest r;
  auto* h = r.mutable_header();
  h->set_job_id("recv");
  h->set_worker_id(1);
  r.set_step(1);
  *r.mutable_spec() = SpecToProto({Reduction::kSparseSum});
  r.set_contributors(1);
  auto* item = r.add_items();
  item->set_origin(1);
  REQUIRE(EncodeBody(SparseVector{kDim, {2, 5}, {1.0f, -1.0f}}, item->mutable_payload()).ok());
  return r;
}

std::string Refusal(const v1::ExchangeRequest& r) {
  Endpoint e(Config());
  const absl::Status st = Receive(e, r);
  REQUIRE(st.code() == absl::StatusCode::kInvalidArgument);
  // The rejection is filed: the local rank's wait for that step fails at once with it.
  const auto taken = e.mailbox.Take({0, 0, 0}, 1, absl::Now());
  CHECK(taken.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(st.message());
}

}  // namespace

TEST_CASE("Receive files a valid step once", "[peer][receive]") {
  Endpoint e(Config());
  REQUIRE(Receive(e, SparseStep()).ok());
  REQUIRE(Receive(e, SparseStep()).ok());
  CHECK(e.mailbox.HeldLetters(0) == 1);
  auto letter = e.mailbox.Take({0, 0, 0}, 1, absl::Now());
  REQUIRE(letter.ok());
  CHECK(letter->partial.contributors == 1);
  CHECK(letter->wire_bytes == SparseStep().ByteSizeLong());
}

TEST_CASE("Receive names the field of a malformed partial state", "[peer][receive]") {
  SECTION("an item for a rank the sender does not cover") {
    auto r = SparseStep();
    r.mutable_items(0)->set_origin(2);
    CHECK(Refusal(r).find("items[0].origin") != std::string::npos);
  }
  SECTION("too many items") {
    auto r = SparseStep();
    *r.add_items() = r.items(0);
    CHECK(Refusal(r).find("items: 2 items") != std::string::npos);
  }
  SECTION("more contributors than ranks covered") {
    auto r = SparseStep();
    r.set_contributors(2);
    CHECK(Refusal(r).find("contributors") != std::string::npos);
  }
  SECTION("a count that does not match the items") {
    auto r = SparseStep();
    r.set_contributors(0);
    CHECK(Refusal(r).find("contributors") != std::string::npos);
  }
  SECTION("an index beyond the range") {
    auto r = SparseStep();
    REQUIRE(EncodeBody(SparseVector{kDim + 4, {10}, {1.0f}}, r.mutable_items(0)->mutable_payload()).ok());
    CHECK(Refusal(r).find("items[0].payload.sparse") != std::string::npos);
  }
  SECTION("a bad spec") {
    auto r = SparseStep();
    r.mutable_spec()->set_reduction(static_cast<v1::ReductionKind>(9));
    CHECK(Refusal(r).find("spec.reduction") != std::string::npos);
  }
}

TEST_CASE("Receive refuses bad headers without filing anything", "[peer][receive]") {
  Endpoint e(Config());
  auto self = SparseStep();
  self.mutable_header()->set_worker_id(0);
  auto shard = SparseStep();
  shard.mutable_header()->set_shard_id(3);
  auto step = SparseStep();
  step.set_step(9);
  auto code = SparseStep();
  code.set_abort_code(99);
  CHECK(Receive(e, self).message().find("header.worker_id") != std::string_view::npos);
  CHECK(Receive(e, shard).message().find("header.shard_id") != std::string_view::npos);
  CHECK(Receive(e, step).message().find("step") != std::string_view::npos);
  CHECK(Receive(e, code).message().find("abort_code") != std::string_view::npos);
  CHECK(e.mailbox.HeldLetters(0) == 0);
}
