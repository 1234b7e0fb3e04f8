// binary16 conversions (see fp16.h): thin wrappers over Debian's libfp16-dev.
#include "common/fp16.h"

#if !__has_include(<fp16.h>)
#error "common/fp16.cc needs the Debian package libfp16-dev (header-only); run scripts/setup.sh"
#endif
#include <bit>

#include <fp16.h>

namespace sketchps {

float HalfBitsToFloat(std::uint16_t h) {
  // Signed zeros are handled here because the library's integer-only conversion evaluates
  // __builtin_clz(0) for them, which is undefined behaviour (UBSan reports it; the result is masked
  // afterwards, but an optimiser may assume the argument is nonzero).
  if ((h & 0x7FFFu) == 0) return (h & 0x8000u) != 0 ? -0.0f : 0.0f;
  // The integer-only variant: exact and NaN-payload preserving (the float-arithmetic variant may
  // quiet signalling NaNs on the way).
  return std::bit_cast<float>(fp16_ieee_to_fp32_bits(h));
}

std::uint16_t FloatToHalfBits(float f) { return fp16_ieee_from_fp32_value(f); }

}  // namespace sketchps
