#include "common/checksum.h"

namespace sketchps {

std::uint64_t WeightsChecksum(std::span<const float> values) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < values.size(); ++i) sum += ChecksumTerm(i, values[i]);
  return sum;
}

}  // namespace sketchps
