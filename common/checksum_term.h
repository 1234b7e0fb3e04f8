// The replica checksum's term (common/checksum.h), on host and device: C++17, so that the kernels
// (kernels/vector_ops.h Checksum) compute the checksum in place on either backend.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/hd.h"
#include "common/splitmix.h"

namespace sketchps {

// SplitMix64 of entry i's position and bit pattern: (i << 32) | bits(v).
SKETCHPS_HD inline std::uint64_t ChecksumTerm(std::uint64_t i, float v) {
  std::uint32_t bits = 0;
  memcpy(&bits, &v, sizeof bits);
  return SplitMix64((i << 32) | bits);
}

}  // namespace sketchps
