#include "common/checksum.h"

#include <xxhash.h>

namespace sketchps {

std::uint64_t WeightsChecksum(std::span<const float> values) { return XXH3_64bits(values.data(), values.size_bytes()); }

}  // namespace sketchps
