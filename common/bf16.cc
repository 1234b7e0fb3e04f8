// bfloat16 conversions (see bf16.h): thin wrappers over Eigen 3.4's Eigen::bfloat16.
#include "common/bf16.h"

#if !__has_include(<Eigen/Core>)
#error "common/bf16.cc needs the Debian package libeigen3-dev (header-only); run scripts/setup.sh"
#endif
#include <Eigen/Core>

namespace sketchps {

static_assert(EIGEN_VERSION_AT_LEAST(3, 4, 0), "common/bf16.cc needs Eigen >= 3.4 (Eigen::bfloat16)");

float BFloat16BitsToFloat(std::uint16_t b) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(static_cast<Eigen::numext::uint16_t>(b)));
}

std::uint16_t FloatToBFloat16Bits(float f) {
  // The general constructor: round to nearest even, NaN -> signed quiet NaN (not the integer-input
  // fast path, which assumes a normal, zero or infinite argument).
  return Eigen::numext::bit_cast<Eigen::numext::uint16_t>(Eigen::bfloat16(f));
}

float RoundToBFloat16(float f) { return BFloat16BitsToFloat(FloatToBFloat16Bits(f)); }

}  // namespace sketchps
