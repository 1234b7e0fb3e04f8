#include "tools/scale_plan.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sketchps::tools {
namespace {

constexpr std::uint32_t kMaxSlots = 1024;

absl::Status Bad(const std::string& step, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--scale ", step, ": ", why));
}

}  // namespace

absl::StatusOr<ScalePlan> ScalePlan::Make(std::uint32_t initial, const std::vector<std::string>& steps,
                                          std::uint64_t rounds) {
  ScalePlan plan;
  plan.initial_ = initial;
  plan.spans_.assign(initial, SlotSpan{});
  std::vector<std::uint32_t> open;  // the open slots, in the order they opened
  for (std::uint32_t s = 0; s < initial; ++s) open.push_back(s);
  std::uint64_t last_round = 0;
  for (const std::string& step : steps) {
    std::vector<std::string> parts = absl::StrSplit(step, ':');
    std::uint64_t round = 0;
    std::uint32_t count = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &round) || !absl::SimpleAtoi(parts[1], &count)) {
      return Bad(step, "is not ROUND:N (e.g. 120:6: N workers from round 120 on)");
    }
    if (round == 0 || round <= last_round) return Bad(step, "rounds must be > 0 and strictly increasing");
    if (rounds > 0 && round >= rounds) return Bad(step, absl::StrCat("the job has ", rounds, " rounds"));
    if (count < 1 || count > kMaxSlots) return Bad(step, absl::StrCat("N must be in [1, ", kMaxSlots, "]"));
    if (count == open.size()) return Bad(step, absl::StrCat("the job already has ", count, " workers then"));
    last_round = round;
    while (open.size() < count) {
      if (plan.spans_.size() >= kMaxSlots) return Bad(step, absl::StrCat("more than ", kMaxSlots, " slots in all"));
      open.push_back(static_cast<std::uint32_t>(plan.spans_.size()));
      plan.spans_.push_back(SlotSpan{round, 0});
    }
    while (open.size() > count) {
      plan.spans_[open.back()].leave = round;
      open.pop_back();
    }
  }
  return plan;
}

std::vector<std::string> ScalePlan::Overrides() const {
  return {"ps.elastic=true", absl::StrCat("workers=", slots()), absl::StrCat("ps.initial_workers=", initial_)};
}

std::vector<std::string> ScalePlan::WorkerFlags(std::uint32_t slot) const {
  std::vector<std::string> flags;
  if (slot >= spans_.size()) return flags;
  if (spans_[slot].join > 0) flags.insert(flags.end(), {"--join-at-round", absl::StrCat(spans_[slot].join)});
  if (spans_[slot].leave > 0) flags.insert(flags.end(), {"--leave-at-round", absl::StrCat(spans_[slot].leave)});
  return flags;
}

}  // namespace sketchps::tools
