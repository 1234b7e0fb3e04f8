#include "common/reason.h"

#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "common/net/grpc_edge.h"
#include "common/status.h"
#include "sketchps/v1/error.pb.h"

using sketchps::Annotate;
using sketchps::FromGrpcStatus;
using sketchps::Reason;
using sketchps::ReasonOf;
using sketchps::ToGrpcStatus;
using sketchps::WithReason;

namespace {

// Every Reason this build knows, by number (the wire protocol's numbering).
constexpr std::uint32_t kLastKnown = static_cast<std::uint32_t>(Reason::kDamagedFile);

}  // namespace

TEST_CASE("A Reason attaches to a status and survives Annotate", "[reason]") {
  const absl::Status plain = absl::FailedPreconditionError("the shard is assembling");
  CHECK(ReasonOf(plain) == Reason::kNone);
  const absl::Status tagged = WithReason(plain, Reason::kRejoin);
  CHECK(ReasonOf(tagged) == Reason::kRejoin);
  CHECK(tagged.message() == plain.message());
  CHECK(sketchps::IsRejoin(tagged));
  CHECK_FALSE(sketchps::IsRejoin(plain));
  const absl::Status annotated = Annotate(Annotate(tagged, "shard 1"), "worker 2");
  CHECK(annotated.message() == "worker 2: shard 1: the shard is assembling");
  CHECK(annotated.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(sketchps::IsRejoin(annotated));
  // A later reason replaces an earlier one; kNone removes it.
  CHECK(ReasonOf(WithReason(tagged, Reason::kReplayRound)) == Reason::kReplayRound);
  CHECK(ReasonOf(WithReason(tagged, Reason::kNone)) == Reason::kNone);
  // OK statuses carry nothing.
  CHECK(WithReason(absl::OkStatus(), Reason::kRejoin).ok());
  CHECK_FALSE(sketchps::IsRejoin(absl::OkStatus()));
  CHECK(Annotate(absl::OkStatus(), "x").ok());
}

TEST_CASE("Every Reason has its own name and numbers this build does not know read as none", "[reason]") {
  std::set<std::string> names;
  for (std::uint32_t n = 0; n <= kLastKnown; ++n) {
    const Reason r = sketchps::ReasonFromNumber(n);
    CHECK(static_cast<std::uint32_t>(r) == n);
    names.insert(sketchps::ReasonName(r));
  }
  CHECK(names.size() == kLastKnown + 1);
  CHECK(sketchps::ReasonFromNumber(kLastKnown + 1) == Reason::kNone);
  CHECK(sketchps::ReasonFromNumber(1u << 31) == Reason::kNone);
}

TEST_CASE("A Reason crosses the gRPC edge in the details, whatever the message says", "[reason]") {
  for (std::uint32_t n = 1; n <= kLastKnown; ++n) {
    const Reason r = sketchps::ReasonFromNumber(n);
    INFO(sketchps::ReasonName(r));
    const absl::Status sent = WithReason(absl::FailedPreconditionError("words for people"), r);
    const grpc::Status wire = ToGrpcStatus(sent);
    sketchps::v1::ErrorDetail detail;
    REQUIRE(detail.ParseFromString(wire.error_details()));
    CHECK(detail.reason() == n);
    CHECK(detail.reason_name() == sketchps::ReasonName(r));
    const absl::Status received = FromGrpcStatus(wire);
    CHECK(received.code() == sent.code());
    CHECK(received.message() == sent.message());
    CHECK(ReasonOf(received) == r);
  }
  // A status without a Reason sends no details; an unknown number from a newer peer reads as none.
  CHECK(ToGrpcStatus(absl::UnavailableError("down")).error_details().empty());
  sketchps::v1::ErrorDetail future;
  future.set_reason(kLastKnown + 7);
  CHECK(ReasonOf(FromGrpcStatus(grpc::Status(grpc::StatusCode::ABORTED, "x", future.SerializeAsString()))) ==
        Reason::kNone);
  CHECK(ReasonOf(FromGrpcStatus(grpc::Status(grpc::StatusCode::ABORTED, "x", "not a message \xff\xff"))) ==
        Reason::kNone);
}

TEST_CASE("An INVALID_ARGUMENT another process returned is a refusal, not this process's configuration error",
          "[reason]") {
  const absl::Status local = absl::InvalidArgumentError("scheme.density: must be in (0, 1]");
  CHECK(sketchps::IsConfigurationError(local));
  const absl::Status remote = FromGrpcStatus(ToGrpcStatus(absl::InvalidArgumentError("payload.values: not finite")));
  CHECK(ReasonOf(remote) == Reason::kRefused);
  CHECK_FALSE(sketchps::IsConfigurationError(remote));
  // A job or a model that differs is a configuration error wherever it was found.
  const absl::Status mismatch = FromGrpcStatus(
      ToGrpcStatus(WithReason(absl::FailedPreconditionError("job differs"), Reason::kFingerprintMismatch)));
  CHECK(sketchps::IsConfigurationError(mismatch));
  CHECK(sketchps::IsConfigurationError(WithReason(absl::FailedPreconditionError("layout"), Reason::kModelMismatch)));
  CHECK_FALSE(sketchps::IsConfigurationError(absl::FailedPreconditionError("round 3 is stale")));
}

TEST_CASE("Transient means another attempt may succeed: by code, or a full queue", "[reason]") {
  CHECK(sketchps::IsTransient(absl::UnavailableError("connection refused")));
  CHECK(sketchps::IsTransient(absl::DeadlineExceededError("slow")));
  CHECK(sketchps::IsTransient(WithReason(absl::ResourceExhaustedError("mailbox full"), Reason::kBusy)));
  CHECK_FALSE(sketchps::IsTransient(absl::ResourceExhaustedError("Received message larger than max")));
  CHECK_FALSE(sketchps::IsTransient(WithReason(absl::ResourceExhaustedError("table"), Reason::kTooLarge)));
  CHECK_FALSE(sketchps::IsTransient(absl::InvalidArgumentError("x")));
  CHECK_FALSE(sketchps::IsTransient(absl::OkStatus()));
}

TEST_CASE("The rewording hook changes the words a process sends and nothing else", "[reason]") {
  const absl::Status sent = WithReason(absl::FailedPreconditionError("join again with your replica"), Reason::kRejoin);
  REQUIRE(setenv("SKETCHPS_TEST_REWORD_ERRORS", "1", 1) == 0);
  const grpc::Status wire = ToGrpcStatus(sent);
  REQUIRE(unsetenv("SKETCHPS_TEST_REWORD_ERRORS") == 0);
  CHECK(wire.error_message().find("join again") == std::string::npos);
  CHECK(wire.error_message() == sketchps::RewordForTests(sent.message()));
  const absl::Status received = FromGrpcStatus(wire);
  CHECK(received.code() == sent.code());
  CHECK(sketchps::IsRejoin(received));
  CHECK(ToGrpcStatus(sent).error_message() == "join again with your replica");  // off again
}

TEST_CASE("A culprit travels with a status, and eviction is not a configuration error", "[reason]") {
  const absl::Status blamed = sketchps::WithCulprit(
      sketchps::WithReason(absl::InvalidArgumentError("dense.values: not finite"), Reason::kMisbehaved), 2);
  CHECK(sketchps::CulpritOf(blamed) == 2u);
  CHECK(sketchps::IsMisbehaved(blamed));
  CHECK(!sketchps::IsConfigurationError(blamed));
  CHECK(!sketchps::CulpritOf(absl::InvalidArgumentError("x")).has_value());
  CHECK(!sketchps::CulpritOf(absl::OkStatus()).has_value());
  CHECK(sketchps::WithCulprit(absl::OkStatus(), 1).ok());
  CHECK(!sketchps::IsConfigurationError(
      sketchps::WithReason(absl::InvalidArgumentError("refused and evicted"), Reason::kEvicted)));
  CHECK(sketchps::IsConfigurationError(absl::InvalidArgumentError("--rank: bad")));
}
