// A damaged newest checkpoint on one shard of an interrupted run (one flipped byte, or the file cut
// to half its length; docs/job-spec.md checkpoint.on_damaged), at the round the resume would load:
//   - `sketchps run --resume` refuses it, naming the file and the shard, and the round the job could
//     resume from intact, and changes nothing in the folder (it used to let that shard load an older
//     round while the others loaded the newest, and every worker then failed naming neither);
//   - with `--set checkpoint.on_damaged=older` the whole job resumes from the newest round every
//     shard and worker still holds intact, and ends bitwise equal to the uninterrupted run.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "ps/checkpoint.h"
#include "support/run_folder.h"

using namespace sketchps;
using namespace sketchps::testing;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kJob = SmallTopkJob("damaged", 80, 10);

// Shard 1's checkpoint of the newest round both shards hold: the one a resume would load (the shards
// may have stopped a round apart, and then each one's newest is not it).
fs::path NewestCommonOfShard1(const fs::path& checkpoints) {
  auto rounds = ps::CheckpointRounds(checkpoints.string());
  REQUIRE(rounds.size() == 2);
  std::erase_if(rounds[1], [&](std::uint64_t r) { return !rounds[0].contains(r); });
  REQUIRE(!rounds[1].empty());
  return checkpoints / ps::CheckpointFileName(1, *rounds[1].rbegin());
}

void Damage(const fs::path& file, const std::string& how) {
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  if (how == "flip") {
    bytes[bytes.size() / 2] ^= 0x20;
  } else {
    bytes.resize(bytes.size() / 2);
  }
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace

TEST_CASE("A damaged newest checkpoint is refused by --resume naming it, or passed over when asked",
          "[run][processes]") {
  const std::string how = GENERATE(std::string("flip"), std::string("truncate"));
  const fs::path reference = FreshRunDir("damaged", "reference-" + how), dir = FreshRunDir("damaged", how);
  REQUIRE(tools::RunJob(QuietRun(reference, kJob)) == 0);
  REQUIRE(RunUntilInterrupted(dir, kJob, 25) == 130);
  const fs::path damaged = NewestCommonOfShard1(dir / "checkpoints");
  Damage(damaged, how);

  // Refused: exit 2, the file and the shard named, the folder untouched.
  const fs::path refused_log = dir.parent_path() / (how + "-refused.log");
  auto refused = launch::Child::Start("sketchps run", RunArgv(dir, kJob, {"--resume"}), refused_log.string());
  REQUIRE(refused.ok());
  CHECK(WaitForExit(*refused, 60) == 2);
  const std::string message = ReadText(refused_log);
  INFO(message);
  CHECK_THAT(message, Catch::Contains(damaged.string()) && Catch::Contains("(shard 1)") &&
                          Catch::Contains("--set checkpoint.on_damaged=older"));
  CHECK(fs::exists(damaged));
  CHECK(!fs::exists(dir / "checkpoints" / "superseded"));

  // Passed over when asked: the newest round every shard holds intact, then bitwise the reference.
  std::vector<std::string> older = kJob;
  older.push_back("checkpoint.on_damaged=older");
  tools::RunOptions resume = QuietRun(dir, older);
  resume.resume = true;
  resume.insecure = true;
  REQUIRE(tools::RunJob(resume) == 0);
  CHECK(fs::exists(dir / "checkpoints" / "superseded" / damaged.filename()));
  CHECK(ReadSummaryFile(dir)["final_weights_checksum"] == ReadSummaryFile(reference)["final_weights_checksum"]);
  fs::remove_all(dir.parent_path());
}
