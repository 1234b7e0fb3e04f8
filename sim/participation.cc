#include "sim/participation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "worker/rng.h"

namespace sketchps::sim {

absl::Status CheckParticipation(double fraction) {
  if (fraction > 0 && fraction <= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--participation: ", fraction, " is not in (0, 1]"));
}

std::uint32_t ParticipantsPerRound(std::uint32_t workers, double fraction) {
  if (fraction >= 1) return workers;
  const auto m = static_cast<std::uint32_t>(std::llround(fraction * workers));
  return std::clamp<std::uint32_t>(m, 1, workers);
}

std::vector<std::uint32_t> Participants(std::uint32_t workers, double fraction, std::uint64_t seed,
                                        std::uint64_t round) {
  std::vector<std::uint32_t> all(workers);
  std::iota(all.begin(), all.end(), 0u);
  const std::uint32_t m = ParticipantsPerRound(workers, fraction);
  if (m == workers) return all;
  worker::SplitMix64 rng(seed * 0x9e3779b97f4a7c15ULL + round * 0xbf58476d1ce4e5b9ULL + 0x7a3u);
  for (std::uint32_t i = 0; i < m; ++i) std::swap(all[i], all[i + rng.Below(workers - i)]);
  all.resize(m);
  std::sort(all.begin(), all.end());
  return all;
}

}  // namespace sketchps::sim
