// IEEE 754 binary16 ("half") conversions, used by the payload codecs for VALUE_F16 arrays.
//
// Semantics:
//   - HalfBitsToFloat is exact for every one of the 65536 bit patterns (every half is a float);
//     NaN payloads and signs are preserved bit for bit.
//   - FloatBitsToHalf / FloatToHalfBits round to nearest, ties to even (the IEEE default), with
//     gradual underflow: floats below the smallest half subnormal round to a signed zero or to the
//     smallest subnormal, and finite floats of magnitude >= 65520 (the midpoint between the largest
//     half, 65504, and 2^16) overflow to a signed infinity. Infinities map to infinities. Every NaN
//     maps to the canonical quiet NaN 0x7E00 with the input's sign bit (NaN payloads are dropped).
//   - Consequently half -> float -> half reproduces every non-NaN half bit pattern exactly, and
//     every NaN pattern as a NaN of the same sign.
// The functions are pure and thread-safe. FloatToHalfBits computes with float arithmetic and
// assumes the default FPU rounding mode (round to nearest), which sketchps never changes.
//
// Why a library: the conversion comes from Debian's libfp16-dev (Marat Dukhan's FP16, the one
// PyTorch, XNNPACK and QNNPACK use), per the house rule to prefer a maintained Debian library over
// hand-written bit twiddling. tests/common/fp16_test.cc checks it exhaustively against independent
// references (all 65536 halves; float -> half against a nearest-value search over ~1.2M floats
// including every tie, subnormal and overflow boundary). The C header stays inside fp16.cc so its
// global static functions do not leak into every includer.
#pragma once

#include <cstdint>

namespace sketchps {

// Largest finite binary16 value.
inline constexpr float kHalfMax = 65504.0f;

// The float exactly equal to the half with bit pattern h.
float HalfBitsToFloat(std::uint16_t h);

// The bit pattern of f rounded to binary16 (nearest, ties to even; see the header paragraph).
std::uint16_t FloatToHalfBits(float f);

}  // namespace sketchps
