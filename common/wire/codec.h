// Payload codecs: in-memory payloads (common/payload.h) <-> sketchps.v1 payload messages.
//
// Wire format (proto/sketchps/v1/payload.proto): every array is a `bytes` field of little-endian
// elements with an explicit element count. Index arrays are STRICTLY INCREASING on the wire under
// both encodings: raw uint32, or delta + varint (the first index, then each gap to the previous
// index, every number a canonical base-128 varint written and read with protobuf's coded streams).
// Values are binary32, or binary16 (common/fp16.h) or bfloat16 (common/bf16.h), both rounded to
// nearest even. The byte order is fixed
// (little-endian) whatever the host's; the code converts explicitly on big-endian hosts.
//
// Encoders accept any index order (they sort (index, value) pairs when needed) and overwrite *out.
// They fail with INVALID_ARGUMENT, leaving *out cleared, when the in-memory value is not valid (see
// payload.h): mismatched array sizes, an index >= dim, a duplicate index, dim > kMaxPayloadDim, a
// table size != rows * cols, or a finite value that would overflow binary16 under kF16 or bfloat16
// under kBF16 (it would arrive as an infinity that the receiver rejects). Their messages name the in-memory field, e.g.
// "SparseVector.idx: duplicate index 3 at positions 0 and 2". Non-finite values are encoded as they
// are: the receiver decides (DecodeLimits::allow_nonfinite).
//
// Decoders treat the message as hostile. They check, BEFORE allocating anything: known enum values,
// dim <= limits.max_dim, count <= limits.max_count and count <= dim, and byte lengths consistent
// with the count (exactly count * element size for raw arrays, between count and 5 * count for
// varint arrays). Only then do they allocate the declared, bounded count and decode, checking every
// index < dim and strictly increasing, varints canonical, at most 32 bits, consuming exactly the
// field's bytes, and (unless allow_nonfinite) every value finite. Every failure is INVALID_ARGUMENT
// with a message that starts with the field's path, e.g.
//   "sparse.indices: index 70000 at position 3 >= dim 65536".
// No input makes a decoder crash, read out of bounds or allocate more than the limits allow.
//
// All functions are thread-safe (no shared state); they do not retain references to their inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/payload.h"
#include "sketchps/v1/payload.pb.h"

namespace sketchps {

// The parameters that make two sketch tables summable.
struct SketchShape {
  std::uint32_t rows = 0;
  std::uint32_t cols = 0;
  std::uint64_t seed = 0;
  std::uint64_t dim = 0;

  friend bool operator==(const SketchShape&, const SketchShape&) = default;
};

// What a receiver is prepared to accept. The defaults accept only empty payloads: set the bounds
// from the shard (ForRange) and the scheme's configuration.
struct DecodeLimits {
  // Largest `dim` a sparse, index-set or sketch payload may declare (the receiving shard's length).
  std::uint64_t max_dim = 0;
  // Largest element count of any array: dense values, sparse pairs, index-set entries, sketch
  // cells (rows * cols). Bounds every allocation a decoder makes.
  std::uint64_t max_count = 0;
  // When set, a sketch payload must have exactly this shape (rows, cols, seed, dim).
  std::optional<SketchShape> expected_sketch;
  // Accept NaN and infinite values (off: any such value is INVALID_ARGUMENT).
  bool allow_nonfinite = false;

  // Limits for a receiver that owns a range of range_len elements: max_dim = max_count = range_len.
  static DecodeLimits ForRange(std::uint64_t range_len) { return {range_len, range_len, std::nullopt, false}; }
};

// ---- Encoders ---------------------------------------------------------------------------------

// Fills *out from in.values. Errors: more than 2^32 - 1 values; overflow under kF16 or kBF16.
absl::Status EncodeDense(const DenseValues& in, ValueEncoding value_encoding, v1::DensePayload* out);

// Fills *out from in, sorting pairs by index when in.idx is not strictly increasing.
// Errors: idx/val size mismatch, dim > kMaxPayloadDim, index >= dim, duplicate index, kF16/kBF16 overflow.
absl::Status EncodeSparse(const SparseVector& in, const EncodeOptions& options, v1::SparsePayload* out);

// Fills *out from in. Errors: table.size() != rows * cols, dim > kMaxPayloadDim, kF16/kBF16 overflow.
absl::Status EncodeSketch(const SketchTable& in, ValueEncoding value_encoding, v1::SketchPayload* out);

// Fills *out from in, sorting the indices when needed. Errors: dim > kMaxPayloadDim, index >= dim,
// duplicate index.
absl::Status EncodeIndexSet(const IndexSet& in, IndexEncoding index_encoding, v1::IndexSetPayload* out);

// ---- Decoders (see the header paragraph for what each checks) --------------------------------

absl::StatusOr<DenseValues> DecodeDense(const v1::DensePayload& in, const DecodeLimits& limits);
absl::StatusOr<SparseVector> DecodeSparse(const v1::SparsePayload& in, const DecodeLimits& limits);
// Also checks the shape against limits.expected_sketch when that is set.
absl::StatusOr<SketchTable> DecodeSketch(const v1::SketchPayload& in, const DecodeLimits& limits);
absl::StatusOr<IndexSet> DecodeIndexSet(const v1::IndexSetPayload& in, const DecodeLimits& limits);

using PayloadBody = std::variant<DenseValues, SparseVector, SketchTable, IndexSet>;

// A decoded sketchps.v1.Payload. The header is copied as is: checking job, epoch, round and phase
// against the receiver's state is the caller's job.
struct DecodedPayload {
  v1::PayloadHeader header;
  PayloadBody body;
};

// Decodes whichever body the oneof holds. Errors: an empty oneof ("payload.body"), or the body
// decoder's error (field paths "dense.*", "sparse.*", "sketch.*", "index_set.*").
absl::StatusOr<DecodedPayload> DecodePayload(const v1::Payload& in, const DecodeLimits& limits);

// ---- Plain float arrays (weights and momentum in Join, GetWeights and checkpoints) ------------

// `values` as binary32 little-endian bytes.
std::string F32Bytes(std::span<const float> values);
// Exactly `count` binary32 little-endian values from `bytes`; finite unless allow_nonfinite.
// INVALID_ARGUMENT naming `field` when the byte length is not 4 * count or a value is not finite;
// nothing is allocated before the length is checked.
absl::StatusOr<std::vector<float>> ParseF32Bytes(const std::string& bytes, std::uint64_t count, absl::string_view field,
                                                 bool allow_nonfinite = false);

// ---- Byte accounting --------------------------------------------------------------------------

// Bytes of one value: 4 (kF32) or 2 (kF16, kBF16).
std::uint64_t ValueBytes(ValueEncoding value_encoding);
// Bytes of a value array of `count` elements: count * ValueBytes(value_encoding).
std::uint64_t ValueArrayBytes(std::uint64_t count, ValueEncoding value_encoding);
// "f32", "f16" or "bf16" (the job key scheme.values spells them so).
const char* ValueEncodingName(ValueEncoding value_encoding);

// Bytes the encoders put in an `indices` field for these indices (any order, no duplicates):
// 4 * n for kRawU32, the sum of the varint sizes of the first index and the gaps for kDeltaVarint.
std::uint64_t IndexArrayBytes(std::span<const std::uint32_t> idx, IndexEncoding index_encoding);

// Bytes of a sketch table field: rows * cols * ValueBytes(value_encoding).
std::uint64_t SketchArrayBytes(std::uint32_t rows, std::uint32_t cols,
                               ValueEncoding value_encoding = ValueEncoding::kF32);

// Whether every value is finite and exactly representable in binary16 (so kF16 is lossless).
bool ExactInHalf(std::span<const float> values);
// Whether encoding `values` in value_encoding is lossless: always for kF32; for kF16 and kBF16,
// every value is finite and exactly representable in that format.
bool ExactIn(std::span<const float> values, ValueEncoding value_encoding);
// Rounds every value of magnitude <= the format's largest finite value to kF16 or kBF16 (nearest,
// ties to even) in place; larger and non-finite values are left as they are. Returns whether every
// value was rounded (then ExactIn(values, value_encoding) holds). kF32: no change, true.
bool RoundValues(std::span<float> values, ValueEncoding value_encoding);

// Where the serialized bytes of a Payload go.
struct WireBytes {
  std::uint64_t arrays = 0;  // the body's `bytes` fields' contents (what a method promises to send)
  std::uint64_t header = 0;  // the header field, with its tag and length
  std::uint64_t total = 0;   // the whole serialized message (Payload::ByteSizeLong())
  // Tags, lengths, counts, dims and encodings of the body: at most kMaxBodyOverheadBytes.
  std::uint64_t overhead() const { return total - arrays - header; }
};

// Upper bound of WireBytes::overhead() for any payload the encoders produce that protobuf can
// serialize (< 2 GiB, so every length prefix fits in 5 bytes): a sketch body with every scalar at
// its maximum takes 35 bytes besides its table, plus 6 for the oneof field's tag and length.
inline constexpr std::uint64_t kMaxBodyOverheadBytes = 41;

// Measures a Payload as it would be serialized.
WireBytes MeasureWireBytes(const v1::Payload& payload);

}  // namespace sketchps
