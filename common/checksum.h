// Replica checksums: a 64-bit digest of a float array's bit patterns that any partition of the
// array computes alike, on either kernel backend:
//
//   WeightsChecksum(x) = Σ_i ChecksumTerm(i, x_i)  mod 2^64,   ChecksumTerm = SplitMix64((i << 32) | bits(x_i))
//
// An integer sum of per-entry hashes, so the order of the additions does not matter: the kernels
// compute it where the weights live (kernels::Checksum, CPU threads or a GPU, without copying them)
// and this host loop gives the same value bit for bit. Arrays that differ in any bit of any entry
// (+0 and −0, NaN payloads included) get different checksums but with probability about 2^-64.
// Workers compare the checksum of their replica of a shard's range with the server's master copy
// after every round (proto: PushPullResponse.weights_checksum), and checkpoints record it.
#pragma once

#include <cstdint>
#include <span>

#include "common/checksum_term.h"

namespace sketchps {

std::uint64_t WeightsChecksum(std::span<const float> values);

}  // namespace sketchps
