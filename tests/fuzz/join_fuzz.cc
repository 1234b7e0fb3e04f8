// Fuzz harness: a shard's Join while it assembles its state (ps/shard_host.h, ps/assembly.h),
// where workers offer their replicas: bytes -> sketchps.v1.JoinRequest as worker 0 (its certificate
// identity) into a fresh shard, then worker 1 joins fresh.
// Invariants:
//   - a refusal names its problem; no Join is answered before every worker has joined;
//   - the shard never stays stuck on a bad offer: if worker 0's fuzzed offer and worker 1's fresh one
//     do not complete assembly, a fresh Join of worker 0 (superseding the fuzzed one) does;
//   - the state served after assembly is finite and matches its checksum.
#include "fuzz/host_driver.h"

namespace {

constexpr char kHarness[] = "join_fuzz";
constexpr auto kWait = std::chrono::seconds(5);

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sketchps;
  using namespace sketchps::fuzz;
  v1::JoinRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto host = OpenFuzzHost("");
  Require(host != nullptr, kHarness, "the fuzz shard does not open");
  auto fuzzed = JoinLater(*host, request, WorkerIdentity(0));
  if (fuzzed.Ready()) {
    auto reply = fuzzed.future.get();
    Require(!reply.ok(), kHarness, "a Join was answered before every worker had joined");
    RequireNamed(reply.status(), kHarness);
    return 0;
  }
  auto fresh = JoinLater(*host, FreshJoin(1), WorkerIdentity(1));
  if (fuzzed.Ready(kWait) && fresh.Ready(kWait)) {
    auto first = fuzzed.future.get();
    RequireNamed(first.status(), kHarness);
    if (first.ok()) NoteAccepted();
    RequireNamed(fresh.future.get().status(), kHarness);
  } else {
    auto again = JoinLater(*host, FreshJoin(0), WorkerIdentity(0));
    Require(again.Ready(kWait) && fresh.Ready(kWait) && fuzzed.Ready(kWait), kHarness,
            "a fresh Join did not complete an assembly the fuzzed offer had stalled");
    RequireNamed(fuzzed.future.get().status(), kHarness);
  }
  CheckServedState(*host, kHarness);
  return 0;
}
