// In-memory phase payloads: the host-side values that common/wire/codec.h encodes into, and decodes
// from, the sketchps.v1 payload messages (proto/sketchps/v1/payload.proto).
//
// These are plain value types (std::vector based, copyable, movable, no invariants enforced by the
// type itself). What makes one valid is documented per type; the encoders check it and the
// decoders only ever return valid objects. Indices are shard-local uint32 positions inside a range
// of `dim` elements, so a valid `dim` is at most kMaxPayloadDim. Equality compares every field
// (floats with ==, so a NaN never equals itself). Not thread-safe beyond the usual rules for
// standard containers (concurrent reads are fine). The header is C++17, so kernels/ may include it.
#pragma once

#include <cstdint>
#include <vector>

namespace sketchps {

// Largest range length a payload may declare: indices are uint32 and ranges are addressed with
// n < 2^32 everywhere (kernels/select.h), so the last valid index is 2^32 - 2.
inline constexpr std::uint64_t kMaxPayloadDim = 0xFFFFFFFFull;

// Values at every position of a range, or at an index set both sides already share.
// Valid: values.size() < 2^32.
struct DenseValues {
  std::vector<float> values;

  friend bool operator==(const DenseValues& a, const DenseValues& b) { return a.values == b.values; }
};

// (index, value) pairs inside a range of `dim` elements.
// Valid: idx.size() == val.size() <= dim <= kMaxPayloadDim and every idx[i] < dim. The decoder
// returns indices strictly increasing; the encoder accepts any order (it sorts) but no duplicates.
struct SparseVector {
  std::uint64_t dim = 0;
  std::vector<std::uint32_t> idx;
  std::vector<float> val;

  friend bool operator==(const SparseVector& a, const SparseVector& b) {
    return a.dim == b.dim && a.idx == b.idx && a.val == b.val;
  }
};

// A Count Sketch table of rows x cols float32 values (row-major) over a range of `dim` elements,
// hashed with `seed`. Two tables are summable only when rows, cols, seed and dim all agree.
// Valid: table.size() == rows * cols and dim <= kMaxPayloadDim.
struct SketchTable {
  std::uint32_t rows = 0;
  std::uint32_t cols = 0;
  std::uint64_t seed = 0;
  std::uint64_t dim = 0;
  std::vector<float> table;

  friend bool operator==(const SketchTable& a, const SketchTable& b) {
    return a.rows == b.rows && a.cols == b.cols && a.seed == b.seed && a.dim == b.dim && a.table == b.table;
  }
};

// A set of positions inside a range of `dim` elements (ScaleCom's leader mask, candidate sets).
// Valid: idx.size() <= dim <= kMaxPayloadDim, every idx[i] < dim, no duplicates. The decoder returns
// indices strictly increasing; the encoder accepts any order.
struct IndexSet {
  std::uint64_t dim = 0;
  std::vector<std::uint32_t> idx;

  friend bool operator==(const IndexSet& a, const IndexSet& b) { return a.dim == b.dim && a.idx == b.idx; }
};

// How index arrays travel (mirrors sketchps.v1.IndexEncoding).
enum class IndexEncoding {
  kRawU32,       // 4 bytes per index, little-endian uint32
  kDeltaVarint,  // first index, then the gaps to the previous one, each a base-128 varint
};

// How value arrays travel (mirrors sketchps.v1.ValueEncoding).
enum class ValueEncoding {
  kF32,   // 4 bytes per value, IEEE binary32 little-endian (exact)
  kF16,   // 2 bytes per value, IEEE binary16 little-endian (lossy, round to nearest even)
  kBF16,  // 2 bytes per value, bfloat16 little-endian (lossy, round to nearest even; common/bf16.h)
};

// Encoding choices for one payload. Defaults are the exact, uncompressed encodings.
struct EncodeOptions {
  IndexEncoding index_encoding = IndexEncoding::kRawU32;
  ValueEncoding value_encoding = ValueEncoding::kF32;
};

}  // namespace sketchps
