// splitmix64 (Steele, Lea, Flood 2014): a 64-bit mixer and PRNG step, usable on host and device.
// sketchps derives every shared pseudo-random choice from it (hash coefficients, sample positions),
// so all nodes and both backends make the same choices from the same seed.
#pragma once

#include <cstdint>

#include "common/hd.h"

namespace sketchps {

// Mixes x into a well-distributed 64-bit value (the splitmix64 output function applied to x).
SKETCHPS_HD inline std::uint64_t SplitMix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Sequential generator: each Next() advances the state by the golden-ratio increment.
class SplitMix64Rng {
 public:
  SKETCHPS_HD explicit SplitMix64Rng(std::uint64_t seed) : state_(seed) {}
  SKETCHPS_HD std::uint64_t Next() {
    const std::uint64_t out = SplitMix64(state_);
    state_ += 0x9E3779B97F4A7C15ull;
    return out;
  }

 private:
  std::uint64_t state_;
};

}  // namespace sketchps
