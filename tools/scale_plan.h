// The membership schedule of `sketchps run --scale ROUND:N` (repeatable): an elastic job
// (ps.elastic, docs/reliability.md "Elastic workers") that starts with the job's `workers` and has N
// members from round ROUND on. Slots are handed out as a stack: scaling up opens new slots (ids
// after every slot used so far: a slot joins once), scaling down closes the highest open slots.
//
//   auto plan = ScalePlan::Make(4, {"120:6", "240:3"});  // slots 0-3 from 0, 4-5 join at 120,
//                                                       // 5, 4, 3 leave before 240: 6 slots in all
//   plan->Overrides()   // {"ps.elastic=true", "workers=6", "ps.initial_workers=4"}
//   plan->WorkerFlags(4)   // {"--join-at-round", "120"}
//
// Errors name --scale: a step that is not ROUND:N, rounds not strictly increasing or not before the
// job's end, N outside [1, 1024] or equal to the count before it, more than 1024 slots in all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sketchps::tools {

struct SlotSpan {
  std::uint64_t join = 0;   // the slot's first round (0: it starts the job)
  std::uint64_t leave = 0;  // the round it leaves before (0: it stays to the end)
};

class ScalePlan {
 public:
  // `rounds`: the job's length; every step's round must be below it (0: not checked).
  static absl::StatusOr<ScalePlan> Make(std::uint32_t initial, const std::vector<std::string>& steps,
                                        std::uint64_t rounds = 0);

  std::uint32_t initial() const { return initial_; }
  std::uint32_t slots() const { return static_cast<std::uint32_t>(spans_.size()); }
  const std::vector<SlotSpan>& spans() const { return spans_; }
  // The job overrides that make the job elastic with this plan's slots.
  std::vector<std::string> Overrides() const;
  // The worker flags of `slot` (--join-at-round, --leave-at-round; none for a slot that stays).
  std::vector<std::string> WorkerFlags(std::uint32_t slot) const;

 private:
  std::uint32_t initial_ = 0;
  std::vector<SlotSpan> spans_;
};

}  // namespace sketchps::tools
