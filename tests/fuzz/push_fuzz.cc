// Fuzz harness: a shard's PushPull (ps/shard_host.h), the path every gradient takes:
// bytes -> sketchps.v1.PushPullRequest, pushed as worker 0 (its certificate identity) into a fresh
// shard that both workers have joined.
// Invariants ("no single message can stall or corrupt a job"):
//   - a refusal names its problem; a push never completes its phase on its own (two workers);
//   - a push the shard admitted (its reply pending) is completed by an identical push of worker 1:
//     both replies arrive, unless the push is for a later phase whose predecessor never ran;
//   - whatever happened, the served weights stay finite and match their checksum.
#include "fuzz/host_driver.h"

namespace {

constexpr char kHarness[] = "push_fuzz";
constexpr auto kPhaseWait = std::chrono::seconds(5);

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sketchps;
  using namespace sketchps::fuzz;
  v1::PushPullRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto host = OpenFuzzHost("");
  Require(host != nullptr, kHarness, "the fuzz shard does not open");
  auto a = JoinLater(*host, FreshJoin(0), WorkerIdentity(0));
  auto b = JoinLater(*host, FreshJoin(1), WorkerIdentity(1));
  Require(a.Ready(kPhaseWait) && b.Ready(kPhaseWait), kHarness, "fresh joins were not answered");

  auto pushed = PushLater(*host, request, WorkerIdentity(0));
  if (pushed.Ready()) {  // refused at once
    auto reply = pushed.future.get();
    Require(!reply.ok(), kHarness, "a push completed its phase without the other worker");
    RequireNamed(reply.status(), kHarness);
  } else {
    NoteAccepted();
    v1::PushPullRequest twin = request;
    twin.mutable_payload()->mutable_header()->set_worker_id(1);
    auto second = PushLater(*host, twin, WorkerIdentity(1));
    const bool done = pushed.Ready(kPhaseWait) && second.Ready(kPhaseWait);
    Require(done || request.payload().header().phase() > 0, kHarness,
            "an admitted phase-0 push and its twin did not complete the phase");
    if (done) {
      for (auto* p : {&pushed, &second}) RequireNamed(p->future.get().status(), kHarness);
    }
  }
  CheckServedState(*host, kHarness);
  return 0;
}
