// Fuzz harness: regroup messages (peer/regroup.h), both directions, without the network:
//   - bytes -> sketchps.v1.RegroupResponse, the coordinator's answer a survivor checks
//     (PlanFromResponse) against its request (epoch 3, rank 2 of 5, next round 100);
//   - bytes -> sketchps.v1.RegroupRequest entries (rank -> next_round) that a coordinator collects,
//     and the decision over them (DecideRegroup).
// Invariants, checked independently of the code under test: an accepted answer is epoch 4, has
// ascending members below 5, a strict majority containing rank 2, and round 99 or 100; a decision is
// the asked ranks in order, a strict majority, and their lowest next round with all within one.
#include <algorithm>
#include <map>

#include "fuzz/fuzz_target.h"
#include "peer/regroup.h"

namespace {

constexpr char kHarness[] = "regroup_fuzz";
constexpr std::size_t kRanks = 5;

void CheckAnswer(const sketchps::v1::RegroupResponse& response) {
  using namespace sketchps;
  v1::RegroupRequest asked;
  asked.set_job_id("fuzz");
  asked.set_epoch(3);
  asked.set_rank(2);
  asked.set_next_round(100);
  auto plan = peer::PlanFromResponse(response, asked, kRanks);
  fuzz::RequireNamed(plan.status(), kHarness);
  if (!plan.ok()) return;
  const auto& m = plan->members;
  fuzz::Require(plan->epoch == 4, kHarness, "an accepted plan is not for epoch 4");
  fuzz::Require(std::adjacent_find(m.begin(), m.end(), std::greater_equal<>()) == m.end(), kHarness,
                "members not ascending");
  fuzz::Require(!m.empty() && m.back() < kRanks && 2 * m.size() > kRanks, kHarness,
                "members out of range or not a majority");
  fuzz::Require(std::binary_search(m.begin(), m.end(), 2u), kHarness, "the asker is not a member");
  fuzz::Require(plan->round == 99 || plan->round == 100, kHarness, "round is not the asker's or the one before");
  fuzz::NoteAccepted();
}

void CheckDecision(const std::map<std::uint32_t, std::uint64_t>& asked) {
  auto plan = sketchps::peer::DecideRegroup(3, kRanks, asked);
  sketchps::fuzz::RequireNamed(plan.status(), kHarness);
  std::uint64_t lo = ~0ull, hi = 0;
  for (const auto& [rank, next] : asked) lo = std::min(lo, next), hi = std::max(hi, next);
  const bool should = 2 * asked.size() > kRanks && hi <= lo + 1;
  sketchps::fuzz::Require(plan.ok() == should, kHarness, "a decision disagrees with the rules");
  if (!plan.ok()) return;
  std::vector<std::uint32_t> ranks;
  for (const auto& [rank, next] : asked) ranks.push_back(rank);
  sketchps::fuzz::Require(plan->members == ranks && plan->round == lo && plan->epoch == 4, kHarness,
                          "a decision is not the asked ranks from their lowest round");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sketchps;
  v1::RegroupResponse response;
  if (response.ParseFromArray(data, static_cast<int>(size))) CheckAnswer(response);
  // Every 9 bytes: a rank (mod 2 * kRanks, so some are out of the epoch and ignored) and a next round.
  std::map<std::uint32_t, std::uint64_t> asked;
  for (std::size_t at = 0; at + 9 <= size; at += 9) {
    const std::uint32_t rank = data[at] % (2 * kRanks);
    std::uint64_t next = 0;
    for (int i = 0; i < 8; ++i) next |= std::uint64_t{data[at + 1 + i]} << (8 * i);
    if (rank < kRanks) asked[rank] = next % 4;  // rounds close together, so both outcomes occur
  }
  CheckDecision(asked);
  return 0;
}
