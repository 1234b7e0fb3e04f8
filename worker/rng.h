// A small portable random generator for everything in worker/ that must be reproducible
// bit-for-bit on every machine: model initialization and the per-epoch data permutation.
//
// SplitMix64 (Steele, Lea, Flood 2014): a fixed integer recurrence, so a seed gives the same stream
// with any compiler, standard library or libtorch version (std:: distributions give no such
// guarantee). Not cryptographic; one instance per thread.
#pragma once

#include <cstdint>

namespace sketchps::worker {

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}

  std::uint64_t Next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1) with 24 random bits (exactly representable as float).
  float Uniform01() { return static_cast<float>(Next() >> 40) * 0x1p-24f; }

  // Uniform in [0, n) without modulo bias (rejection sampling); n >= 1.
  std::uint64_t Below(std::uint64_t n) {
    const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
    std::uint64_t x = Next();
    while (x >= limit) x = Next();
    return x % n;
  }

 private:
  std::uint64_t state_;
};

}  // namespace sketchps::worker
