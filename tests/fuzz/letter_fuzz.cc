// Fuzz harness: decentralized-mode letters (peer/service.h Receive, peer/partial_proto.h DecodePartial), what
// a worker's Peer service files from the other workers: bytes -> sketchps.v1.ExchangeRequest into
// rank 1 of a 4-worker, 2-shard epoch whose mailboxes have begun round kRound (plaintext: the
// certificate binding is tested in tests/peer/tls_test.cc).
// Invariants: refusals are named; the mailbox never holds more than its bound; a stored letter can
// be taken (as itself or as its rejection); a letter taken intact re-encodes (EncodePartial) to a
// request that a fresh endpoint files and decodes to the same contributor count and items.
#include "fuzz/fuzz_target.h"
#include "peer/partial_proto.h"
#include "peer/service.h"

namespace {

constexpr char kHarness[] = "letter_fuzz";
constexpr std::uint64_t kRound = 5;

std::unique_ptr<sketchps::peer::Endpoint> MakeEndpoint(bool tree) {
  sketchps::peer::PeerConfig c;
  c.job_id = "fuzz";
  c.epoch = 1;
  c.rank = 1;
  c.num_workers = 4;
  c.range_lengths = {16, 24};
  c.sparse_tree_merge = tree;
  auto e = std::make_unique<sketchps::peer::Endpoint>(c);
  for (std::uint32_t shard = 0; shard < 2; ++shard) e->mailbox.Begin(sketchps::peer::PhaseRef{shard, kRound, 0});
  return e;
}

bool SameItems(const sketchps::peer::Partial& a, const sketchps::peer::Partial& b) {
  if (a.contributors != b.contributors || a.items.size() != b.items.size()) return false;
  for (std::size_t i = 0; i < a.items.size(); ++i) {
    if (a.items[i].origin != b.items[i].origin || a.items[i].payload != b.items[i].payload) return false;
  }
  return true;
}

void CheckRoundTrip(const sketchps::v1::ExchangeRequest& request, const sketchps::peer::Letter& letter, bool tree) {
  using namespace sketchps;
  v1::ExchangeRequest again;
  *again.mutable_header() = request.header();
  again.set_step(request.step());
  *again.mutable_spec() = request.spec();
  const absl::Status encoded = peer::EncodePartial(letter.partial, &again);
  fuzz::Require(encoded.ok(), kHarness, "a filed letter does not re-encode: " + encoded.ToString());
  auto fresh = MakeEndpoint(tree);
  const absl::Status filed = peer::Receive(*fresh, again);
  fuzz::Require(filed.ok(), kHarness, "a re-encoded letter is refused: " + filed.ToString());
  const peer::PhaseRef ref{request.header().shard_id(), request.header().round(), request.header().phase()};
  auto back = fresh->mailbox.Take(ref, request.step(), absl::Now());
  fuzz::Require(back.ok() && SameItems(back->partial, letter.partial), kHarness,
                "a letter changed in a re-encode round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sketchps;
  v1::ExchangeRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  for (const bool tree : {false, true}) {
    auto endpoint = MakeEndpoint(tree);
    const absl::Status filed = peer::Receive(*endpoint, request);
    fuzz::RequireNamed(filed, kHarness);
    for (std::uint32_t shard = 0; shard < 2; ++shard) {
      fuzz::Require(endpoint->mailbox.HeldLetters(shard) <= 1, kHarness, "one request filed more than one letter");
    }
    if (!filed.ok() || request.abort_code() != 0) continue;
    const peer::PhaseRef ref{request.header().shard_id(), request.header().round(), request.header().phase()};
    auto letter = endpoint->mailbox.Take(ref, request.step(), absl::Now());
    fuzz::RequireNamed(letter.status(), kHarness);
    const bool stale = request.header().round() < kRound;  // acknowledged and dropped
    fuzz::Require(letter.ok() || stale || letter.status().code() != absl::StatusCode::kDeadlineExceeded, kHarness,
                  "an accepted letter cannot be taken");
    if (!letter.ok()) continue;
    CheckRoundTrip(request, *letter, tree);
    if (!tree) fuzz::NoteAccepted();
  }
  return 0;
}
