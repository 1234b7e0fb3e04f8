// Internal to the payload codecs (codec.cc, codec_decode.cc): byte-order helpers and error
// formatting shared by the encoders and the decoders. Not part of the public API.
//
// Arrays travel little-endian. On a little-endian host the 32-bit copies are plain memcpy; on a
// big-endian host they assemble every element byte by byte, so the wire format never depends on
// the host. Mixed-endian hosts are rejected at compile time.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace sketchps::codec_internal {

static_assert(std::endian::native == std::endian::little || std::endian::native == std::endian::big,
              "sketchps payload codecs support little- and big-endian hosts only");
inline constexpr bool kLittleEndianHost = std::endian::native == std::endian::little;

// INVALID_ARGUMENT whose message starts with the field path: "<field>: <details...>".
template <typename... Args>
absl::Status Invalid(absl::string_view field, const Args&... details) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", details...));
}

// Byte-by-byte little-endian copies: correct on any host. Used on big-endian hosts, and tested on
// little-endian ones (tests/common/codec_test.cc) so that the big-endian path is exercised too.
template <typename T>
void StoreLE32Bytewise(const T* src, std::size_t n, char* dst) {
  static_assert(sizeof(T) == 4);
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = std::bit_cast<std::uint32_t>(src[i]);
    for (int b = 0; b < 4; ++b) dst[4 * i + b] = static_cast<char>((v >> (8 * b)) & 0xFFu);
  }
}

template <typename T>
void LoadLE32Bytewise(const char* src, std::size_t n, T* dst) {
  static_assert(sizeof(T) == 4);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t v = 0;
    for (int b = 0; b < 4; ++b) v |= std::uint32_t{static_cast<unsigned char>(src[4 * i + b])} << (8 * b);
    dst[i] = std::bit_cast<T>(v);
  }
}

// Writes n 4-byte elements (uint32_t or float) to dst as little-endian bytes.
template <typename T>
void StoreLE32(const T* src, std::size_t n, char* dst) {
  static_assert(sizeof(T) == 4);
  if constexpr (kLittleEndianHost) {
    if (n > 0) std::memcpy(dst, src, n * 4);
  } else {
    StoreLE32Bytewise(src, n, dst);
  }
}

// Reads n 4-byte little-endian elements (uint32_t or float) from src into dst.
template <typename T>
void LoadLE32(const char* src, std::size_t n, T* dst) {
  static_assert(sizeof(T) == 4);
  if constexpr (kLittleEndianHost) {
    if (n > 0) std::memcpy(dst, src, n * 4);
  } else {
    LoadLE32Bytewise(src, n, dst);
  }
}

// Writes one 16-bit value as two little-endian bytes.
inline void StoreLE16(std::uint16_t v, char* dst) {
  dst[0] = static_cast<char>(v & 0xFFu);
  dst[1] = static_cast<char>(v >> 8);
}

// Reads one 16-bit little-endian value.
inline std::uint16_t LoadLE16(const char* src) {
  return static_cast<std::uint16_t>(static_cast<unsigned char>(src[0]) | (static_cast<unsigned char>(src[1]) << 8));
}

}  // namespace sketchps::codec_internal
