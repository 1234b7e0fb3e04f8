// Partial participation for the simulator (sim/): which workers take part in each round. Torch-free,
// deterministic for a seed (SplitMix64, worker/rng.h), the same on every machine.
//
//   fraction 1:   every worker, every round;
//   fraction f:   m = max(1, round(f P)) distinct workers per round, drawn uniformly without
//                 replacement (the first m steps of a Fisher-Yates shuffle seeded by (seed, round)),
//                 independently of the other rounds, as FedAvg and FetchSGD sample clients.
// The workers not drawn sit the round out (engine/scheme.h RoundInfo::sits_out).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace sketchps::sim {

// OK when fraction is in (0, 1]; else InvalidArgument naming --participation.
absl::Status CheckParticipation(double fraction);

// Workers drawn per round: P when fraction >= 1, else max(1, round(fraction * P)).
std::uint32_t ParticipantsPerRound(std::uint32_t workers, double fraction);

// The round's participants, sorted ascending.
std::vector<std::uint32_t> Participants(std::uint32_t workers, double fraction, std::uint64_t seed,
                                        std::uint64_t round);

}  // namespace sketchps::sim
