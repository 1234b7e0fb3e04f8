// The peer mailbox: idempotent puts, stale letters dropped, bounded size (in all and per sender), a
// round window, deadlines, rejections and abort notices.
#include "peer/mailbox.h"

#include <thread>

#include <catch2/catch.hpp>

#include "absl/time/clock.h"

using namespace sketchps;
using namespace sketchps::peer;

namespace {

Letter Make(std::uint32_t sender, std::uint32_t contributors) {
  Letter l;
  l.sender = sender;
  l.partial.contributors = contributors;
  return l;
}

}  // namespace

TEST_CASE("Mailbox: a retried or stale letter is acknowledged and dropped", "[peer][mailbox]") {
  Mailbox box(2, 8);
  const PhaseRef ref{1, 5, 0};
  box.Begin(ref);
  REQUIRE(box.Put(ref, 1, Make(1, 1), 8).ok());
  REQUIRE(box.Put(ref, 1, Make(1, 9), 8).ok());  // a retry: the first copy stays
  CHECK(box.HeldLetters(1) == 1);
  auto got = box.Take(ref, 1, absl::Now() + absl::Seconds(1));
  REQUIRE(got.ok());
  CHECK(got->partial.contributors == 1);
  CHECK(box.Put(ref, 1, Make(1, 9), 8).ok());  // after it was taken
  CHECK(box.HeldLetters(1) == 0);
  CHECK(box.Put(PhaseRef{1, 4, 1}, 1, Make(1, 1), 8).ok());  // an older phase
  CHECK(box.HeldLetters(1) == 0);
  CHECK(box.HeldLetters(0) == 0);
}

TEST_CASE("Mailbox: bounded with deadlines and rejections and aborts", "[peer][mailbox]") {
  Mailbox box(1, 2);
  const PhaseRef ref{0, 3, 1};
  SECTION("full") {
    REQUIRE(box.Put(ref, 0, Make(1, 1), 8).ok());
    REQUIRE(box.Put(ref, 1, Make(2, 1), 8).ok());
    CHECK(box.Put(ref, 2, Make(3, 1), 8).code() == absl::StatusCode::kResourceExhausted);
    box.Begin(PhaseRef{0, 4, 0});  // moving on drops the older phase's letters
    CHECK(box.HeldLetters(0) == 0);
  }
  SECTION("deadline") {
    const absl::Time t0 = absl::Now();
    auto got = box.Take(ref, 0, t0 + absl::Milliseconds(100));
    CHECK(got.status().code() == absl::StatusCode::kDeadlineExceeded);
    CHECK(absl::Now() - t0 >= absl::Milliseconds(90));
  }
  SECTION("a letter that arrives while waiting") {
    std::thread late([&] {
      absl::SleepFor(absl::Milliseconds(50));
      (void)box.Put(ref, 2, Make(1, 7), 8);
    });
    auto got = box.Take(ref, 2, absl::Now() + absl::Seconds(5));
    late.join();
    REQUIRE(got.ok());
    CHECK(got->partial.contributors == 7);
  }
  SECTION("rejected") {
    Letter bad = Make(1, 0);
    bad.rejected = absl::InvalidArgumentError("dense.values: not finite");
    REQUIRE(box.Put(ref, 1, std::move(bad), 8).ok());
    CHECK(box.Take(ref, 1, absl::Now() + absl::Seconds(1)).status().code() == absl::StatusCode::kInvalidArgument);
  }
  SECTION("abort") {
    REQUIRE(box.Abort(ref, PeerAbortStatus(absl::StatusCode::kUnavailable, "rank 2 is gone")));
    auto got = box.Take(ref, 0, absl::Now() + absl::Seconds(5));
    CHECK(got.status().code() == absl::StatusCode::kUnavailable);
    CHECK(IsPeerAbort(got.status()));
    CHECK_FALSE(IsPeerAbort(absl::UnavailableError("x")));
  }
}

TEST_CASE("Mailbox: one sender cannot fill a shard's box", "[peer][mailbox]") {
  Mailbox box(1, 8);
  const PhaseRef ref{0, 3, 1};
  box.Begin(ref);
  REQUIRE(box.Put(ref, 0, Make(1, 1), 2).ok());
  REQUIRE(box.Put(PhaseRef{0, 3, 2}, 0, Make(1, 1), 2).ok());
  const absl::Status third = box.Put(PhaseRef{0, 3, 3}, 0, Make(1, 1), 2);
  CHECK(third.code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(third.message()).find("rank 1") != std::string::npos);
  CHECK(box.Put(ref, 1, Make(2, 1), 2).ok());  // another sender still gets in
  CHECK(box.HeldLetters(0) == 3);
}

TEST_CASE("Mailbox: letters and aborts more than one round ahead are refused", "[peer][mailbox]") {
  Mailbox box(1, 8);
  box.Begin(PhaseRef{0, 10, 0});
  CHECK(box.Put(PhaseRef{0, 11, 0}, 0, Make(1, 1), 8).ok());  // the next round: a peer may be there
  const absl::Status far = box.Put(PhaseRef{0, 12, 0}, 0, Make(1, 1), 8);
  CHECK(far.code() == absl::StatusCode::kUnavailable);
  CHECK(std::string(far.message()).find("header.round") != std::string::npos);
  CHECK(box.HeldLetters(0) == 1);
  CHECK_FALSE(box.Abort(PhaseRef{0, 1000, 0}, PeerAbortStatus(absl::StatusCode::kUnavailable, "x")));
  CHECK(box.Abort(PhaseRef{0, 11, 0}, PeerAbortStatus(absl::StatusCode::kUnavailable, "x")));
}
