// bfloat16 ("brain float": the top 16 bits of a binary32) conversions, used by the payload codecs
// for VALUE_BF16 arrays.
//
// Semantics:
//   - BFloat16BitsToFloat is exact for every one of the 65536 bit patterns (every bfloat16 is a
//     float: its bits followed by 16 zero bits); NaN payloads and signs are preserved bit for bit.
//   - FloatToBFloat16Bits rounds to nearest, ties to even. bfloat16 has binary32's exponent range,
//     so there is no new underflow: float subnormals round to bfloat16 subnormals or a signed zero
//     (no flush to zero). Finite floats of magnitude >= 2^128 - 2^119 (the midpoint between the
//     largest bfloat16, kBFloat16Max = 2^128 - 2^120, and 2^128) overflow to a signed infinity;
//     infinities map to infinities. Every NaN maps to the quiet NaN 0x7FC0 with the input's sign
//     bit (NaN payloads are dropped), never to an infinity.
//   - Consequently bfloat16 -> float -> bfloat16 reproduces every non-NaN bit pattern exactly, and
//     every NaN pattern as a NaN of the same sign.
// The functions are pure and thread-safe; they use integer arithmetic only (no FPU mode matters).
//
// Why a library: the conversion is Eigen 3.4's Eigen::bfloat16 (Debian's libeigen3-dev, header
// only; the type TensorFlow and XLA use), per the house rule to prefer a maintained Debian library
// over hand-written bit twiddling. tests/common/bf16_test.cc checks it exhaustively against
// independent references (all 65536 bfloat16 patterns; float -> bfloat16 against a nearest-value
// search with long double over a large sample including every tie, subnormals and the overflow
// boundary). Eigen's headers stay inside bf16.cc so that includers do not compile Eigen.
#pragma once

#include <bit>
#include <cstdint>

namespace sketchps {

// Largest finite bfloat16 value: (2 - 2^-7) * 2^127 = 2^128 - 2^120 (bit pattern 0x7F7F).
inline constexpr float kBFloat16Max = std::bit_cast<float>(0x7F7F0000u);

// The float exactly equal to the bfloat16 with bit pattern b.
float BFloat16BitsToFloat(std::uint16_t b);

// The bit pattern of f rounded to bfloat16 (nearest, ties to even; see the header paragraph).
std::uint16_t FloatToBFloat16Bits(float f);

// f rounded to bfloat16 and back: BFloat16BitsToFloat(FloatToBFloat16Bits(f)).
float RoundToBFloat16(float f);

}  // namespace sketchps
