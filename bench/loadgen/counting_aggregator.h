// An Aggregator decorator that counts, per (shard, phase), the raw bytes of the payloads one worker
// contributes and of the results it receives (engine/phase.h RawPayloadBytes: u32 indices and f32
// values, the unit each scheme's byte formula is stated in). The load generator wraps every
// worker's transport aggregator in one.
//
// Thread-safety: RunPhase may run concurrently for different shards (Replica runs its shards in
// parallel); each shard's slots are written only by that shard's calls. Snapshot() must be called
// between rounds, when no RunPhase is in flight. Phases >= kPhaseSlots and unknown shards pass
// through uncounted.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "bench/loadgen/figures.h"
#include "engine/aggregator.h"

namespace sketchps::bench {

inline constexpr std::uint32_t kPhaseSlots = kMaxPhases;  // every phase id, kAuxPhase included

// [shard][phase] totals of one worker.
using PhaseSlots = std::vector<std::array<PhaseTotals, kPhaseSlots>>;

class CountingAggregator final : public Aggregator {
 public:
  // `inner` must outlive this object.
  CountingAggregator(Aggregator& inner, std::uint32_t shards) : inner_(inner), slots_(shards) {}

  absl::StatusOr<std::shared_ptr<const PhaseResult>> RunPhase(std::uint32_t shard, std::uint64_t round,
                                                              std::uint32_t phase, Contribution contribution) override;
  std::uint32_t worker_id() const override { return inner_.worker_id(); }
  std::uint32_t num_workers() const override { return inner_.num_workers(); }

  // The totals so far (call between rounds).
  PhaseSlots Snapshot() const { return slots_; }

 private:
  Aggregator& inner_;
  PhaseSlots slots_;
};

}  // namespace sketchps::bench
