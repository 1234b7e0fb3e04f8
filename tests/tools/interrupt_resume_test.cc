// Ctrl-C, then `sketchps run --resume`, with a method that keeps state on the workers (top-k with
// error feedback): the resumed job ends bitwise equal to the uninterrupted run (docs/deploy.md
// promises --resume is exact). The launcher stops the workers first, each between two rounds
// (tools/local_cluster.h), every worker saves its state after every round, and the resume starts from
// a round every shard and worker holds (tools/resume_round.h), so the workers restart with their
// residuals, not empty ones.
// The reference is an independent run of the same job without the interrupt.
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "support/run_folder.h"

using namespace sketchps;
using namespace sketchps::testing;
namespace fs = std::filesystem;

namespace {

constexpr int kRounds = 120;

// The round worker `rank`'s log says it restored its state of, or -1.
int RestoredRound(const fs::path& dir, int rank) {
  const std::string log = ReadText(dir / ("worker-" + std::to_string(rank) + ".log"));
  std::smatch m;
  if (!std::regex_search(log, m, std::regex("restored the scheme state of round (\\d+)"))) return -1;
  return std::stoi(m[1]);
}

// Runs `job` (kRounds rounds) without and with a Ctrl-C after `interrupt_after` rounds and a --resume,
// and checks that both end bitwise alike, the resumed workers from their state at or past the interrupt.
void CheckResumeIsExact(const std::string& name, const std::vector<std::string>& job, std::size_t interrupt_after) {
  const fs::path reference = FreshRunDir(name, "reference"), dir = FreshRunDir(name, "interrupted");
  REQUIRE(tools::RunJob(QuietRun(reference, job)) == 0);
  const nlohmann::json expected = ReadSummaryFile(reference);
  REQUIRE(expected.is_object());

  REQUIRE(RunUntilInterrupted(dir, job, interrupt_after) == 130);
  const std::size_t recorded = JsonLinesOf(dir / "worker-0.jsonl").size();
  CHECK(recorded < kRounds);
  // Nothing half-written: the workers finish the state file they are writing before they stop.
  for (const auto& e : fs::recursive_directory_iterator(dir)) CHECK(e.path().extension() != ".tmp");

  tools::RunOptions resume = QuietRun(dir, job);
  resume.resume = true;
  resume.insecure = true;
  resume.job.log_level = "info";  // the workers log the state they restored at info
  REQUIRE(tools::RunJob(resume) == 0);
  const nlohmann::json summary = ReadSummaryFile(dir);
  CHECK(summary["rounds"] == kRounds);
  CHECK(summary["final_weights_checksum"] == expected["final_weights_checksum"]);
  for (int rank : {0, 1}) {
    INFO("rank " << rank);
    std::vector<int> rounds;
    for (const auto& r : JsonLinesOf(dir / ("worker-" + std::to_string(rank) + ".jsonl"))) rounds.push_back(r["round"]);
    CHECK(rounds.size() == kRounds);
    for (int i = 0; i < static_cast<int>(rounds.size()); ++i) CHECK(rounds[i] == i);
    // Not from an older checkpoint round (25): the workers stopped between rounds, so every shard and
    // worker holds the last round, at or past the interrupt.
    CHECK(RestoredRound(dir, rank) >= static_cast<int>(interrupt_after));
    CHECK_THAT(ReadText(dir / ("worker-" + std::to_string(rank) + ".log")), !Catch::Contains("empty scheme state"));
  }
  fs::remove_all(dir.parent_path());
}

}  // namespace

TEST_CASE("Ctrl-C then --resume ends bitwise equal to the uninterrupted run with top-k's residuals",
          "[run][processes]") {
  CheckResumeIsExact("interrupt", SmallTopkJob("interrupt", kRounds, 25), 40);
}

TEST_CASE("Ctrl-C then --resume with local steps and the Nesterov outer step ends bitwise equal", "[run][processes]") {
  // The outer momentum is in the shards' checkpoints and the workers' state files; the inner
  // optimizer's state, kept across rounds (train.inner_state keep, the harder case than the default
  // reset), is in the workers' state files too (worker/local_steps.h).
  std::vector<std::string> job = SmallTopkJob("interrupt-local", kRounds, 25);
  job.insert(job.end(), {"train.local_steps=3", "train.outer_optimizer.name=nesterov", "train.inner_state=keep"});
  CheckResumeIsExact("interrupt-local", job, 40);
}
