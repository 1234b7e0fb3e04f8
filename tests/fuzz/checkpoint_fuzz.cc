// Fuzz harness: shard checkpoints (ps/checkpoint.h), which a restarting shard reads from disk:
// bytes (fuzz_target.h FileBytes: a file, or a payload framed here) -> ParseCheckpointBytes (framing, CRC, parse,
// sizes); a file that passes is then put in a checkpoint directory and the shard is opened from it (ShardHost::Open
// restores it against the job), and both workers join fresh. Invariants: refusals are named; a restored shard completes
// assembly with fresh workers and serves finite weights that match their checksum.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/wire/framed_file.h"
#include "fuzz/host_driver.h"
#include "ps/checkpoint.h"

namespace {

constexpr char kHarness[] = "checkpoint_fuzz";
constexpr auto kWait = std::chrono::seconds(5);

const std::filesystem::path& Dir() {
  static const std::filesystem::path dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sketchps-fuzz-ckpt-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) sketchps::fuzz::Fail(kHarness, "cannot make a temporary directory");
    return std::filesystem::path(tmpl);
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sketchps;
  using namespace sketchps::fuzz;
  const std::string bytes = fuzz::FileBytes(data, size, ps::kCheckpointMagic, &FrameBytes);
  auto parsed = ps::ParseCheckpointBytes(bytes, "fuzz.ckpt");
  RequireNamed(parsed.status(), kHarness);
  if (!parsed.ok()) return 0;
  std::filesystem::remove_all(Dir());
  std::filesystem::create_directories(Dir());
  std::ofstream(Dir() / "shard-0-round-000000000001.ckpt", std::ios::binary) << bytes;
  absl::Status error;
  auto host = OpenFuzzHost(Dir().string(), &error);
  if (!host) {
    RequireNamed(error, kHarness);
    Require(!error.ok(), kHarness, "the shard did not open without saying why");
    return 0;
  }
  auto a = JoinLater(*host, FreshJoin(0), WorkerIdentity(0));
  auto b = JoinLater(*host, FreshJoin(1), WorkerIdentity(1));
  Require(a.Ready(kWait) && b.Ready(kWait), kHarness, "fresh joins to a restored shard were not answered");
  auto first = a.future.get();
  RequireNamed(first.status(), kHarness);
  RequireNamed(b.future.get().status(), kHarness);
  if (first.ok() && host->origin() != "no checkpoint") NoteAccepted();
  CheckServedState(*host, kHarness);
  return 0;
}
