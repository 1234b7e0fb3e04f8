// Replica checksums: a 64-bit hash of a float array's bytes (XXH3, from Debian's libxxhash).
//
// Two arrays have the same checksum when they are bitwise equal; different arrays collide with
// probability about 2^-64. Workers compare the checksum of their replica of a shard's range with the
// server's master copy after every round (proto: PushPullResponse.weights_checksum).
#pragma once

#include <cstdint>
#include <span>

namespace sketchps {

std::uint64_t WeightsChecksum(std::span<const float> values);

}  // namespace sketchps
