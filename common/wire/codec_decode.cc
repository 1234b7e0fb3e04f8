// Payload decoders (see codec.h). Every decoder runs in two steps: checks on the declared sizes
// that need no allocation (enums, dims, counts, byte lengths), then one allocation of the declared,
// already bounded count and an element-wise decode that checks every index and value.
#include <climits>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/bf16.h"
#include "common/fp16.h"
#include "common/status.h"
#include "common/wire/codec.h"
#include "common/wire/codec_wire.h"
#include "google/protobuf/io/coded_stream.h"

namespace sketchps {
namespace {

using codec_internal::Invalid;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;

constexpr std::uint64_t kU32Max = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t kMaxVarint32Bytes = 5;

absl::StatusOr<IndexEncoding> ParseIndexEncoding(absl::string_view field, int value) {
  switch (value) {
    case v1::INDEX_RAW_U32: return IndexEncoding::kRawU32;
    case v1::INDEX_DELTA_VARINT: return IndexEncoding::kDeltaVarint;
    default: return Invalid(field, "unknown enum value ", value);
  }
}

absl::StatusOr<ValueEncoding> ParseValueEncoding(absl::string_view field, int value) {
  switch (value) {
    case v1::VALUE_F32: return ValueEncoding::kF32;
    case v1::VALUE_F16: return ValueEncoding::kF16;
    case v1::VALUE_BF16: return ValueEncoding::kBF16;
    default: return Invalid(field, "unknown enum value ", value);
  }
}

absl::Status CheckDim(absl::string_view field, std::uint64_t dim, const DecodeLimits& limits) {
  if (dim > limits.max_dim) return Invalid(field, dim, " exceeds max_dim ", limits.max_dim);
  if (dim > kMaxPayloadDim) return Invalid(field, dim, " exceeds the uint32 index range ", kMaxPayloadDim);
  return absl::OkStatus();
}

absl::Status CheckCount(absl::string_view field, std::uint64_t count, const DecodeLimits& limits) {
  if (count > limits.max_count) return Invalid(field, count, " exceeds max_count ", limits.max_count);
  return absl::OkStatus();
}

// Count of distinct indices below dim: at most dim.
absl::Status CheckIndexCount(absl::string_view field, std::uint64_t count, std::uint64_t dim,
                             const DecodeLimits& limits) {
  SKETCHPS_RETURN_IF_ERROR(CheckCount(field, count, limits));
  if (count > dim) return Invalid(field, count, " exceeds dim ", dim, " (indices are distinct and < dim)");
  return absl::OkStatus();
}

absl::Status CheckIndexBytes(absl::string_view field, std::size_t bytes, std::uint64_t count, IndexEncoding encoding) {
  if (encoding == IndexEncoding::kRawU32) {
    if (bytes != 4 * count) return Invalid(field, bytes, " bytes, expected count ", count, " x 4 = ", 4 * count);
  } else if (bytes < count || bytes > kMaxVarint32Bytes * count) {
    return Invalid(field, bytes, " bytes cannot hold count ", count, " varints (", count, " to ",
                   kMaxVarint32Bytes * count, " bytes)");
  }
  return absl::OkStatus();
}

absl::Status CheckValueBytes(absl::string_view field, std::size_t bytes, std::uint64_t count, ValueEncoding encoding) {
  const std::uint64_t element = ValueBytes(encoding);
  // Only sketch cell counts (rows * cols) can get this large, and only with an absurd max_count.
  if (count > std::numeric_limits<std::uint64_t>::max() / element) return Invalid(field, "count ", count, " overflows");
  if (bytes != count * element) {
    return Invalid(field, bytes, " bytes, expected count ", count, " x ", element, " = ", count * element);
  }
  return absl::OkStatus();
}

// Decodes idx.size() delta+varint indices that must consume `bytes` exactly. Sizes were checked.
absl::Status ReadVarintIndices(absl::string_view field, const std::string& bytes, std::span<std::uint32_t> idx) {
  if (bytes.size() > static_cast<std::size_t>(INT_MAX)) return Invalid(field, bytes.size(), " bytes is too long");
  CodedInputStream in(reinterpret_cast<const std::uint8_t*>(bytes.data()), static_cast<int>(bytes.size()));
  std::uint64_t prev = 0;
  for (std::size_t i = 0; i < idx.size(); ++i) {
    const int start = in.CurrentPosition();
    std::uint64_t gap = 0;
    if (!in.ReadVarint64(&gap)) return Invalid(field, "truncated or unterminated varint at position ", i);
    if (gap > kU32Max) return Invalid(field, "varint ", gap, " at position ", i, " overflows 32 bits");
    const auto used = static_cast<std::size_t>(in.CurrentPosition() - start);
    if (used != CodedOutputStream::VarintSize64(gap)) {
      return Invalid(field, "over-long varint at position ", i, " (", used, " bytes for ", gap, ")");
    }
    const std::uint64_t value = (i == 0) ? gap : prev + gap;
    if (value > kU32Max) {
      return Invalid(field, "index at position ", i, " overflows 2^32 (previous ", prev, " + gap ", gap, ")");
    }
    idx[i] = static_cast<std::uint32_t>(value);
    prev = value;
  }
  const auto consumed = static_cast<std::size_t>(in.CurrentPosition());
  if (consumed != bytes.size()) {
    return Invalid(field, bytes.size() - consumed, " trailing bytes after ", idx.size(), " varints");
  }
  return absl::OkStatus();
}

absl::Status CheckIncreasingBelow(absl::string_view field, std::span<const std::uint32_t> idx, std::uint64_t dim) {
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] >= dim) return Invalid(field, "index ", idx[i], " at position ", i, " >= dim ", dim);
    if (i > 0 && idx[i] <= idx[i - 1]) {
      return Invalid(field, "index ", idx[i], " at position ", i, " is not greater than the previous index ",
                     idx[i - 1], " (indices must be strictly increasing)");
    }
  }
  return absl::OkStatus();
}

// Sizes were checked: count <= limits.max_count and the byte length matches the encoding.
absl::StatusOr<std::vector<std::uint32_t>> ReadIndices(absl::string_view field, const std::string& bytes,
                                                       std::uint64_t count, std::uint64_t dim, IndexEncoding encoding) {
  std::vector<std::uint32_t> idx(count);
  if (encoding == IndexEncoding::kRawU32) {
    codec_internal::LoadLE32(bytes.data(), idx.size(), idx.data());
  } else {
    SKETCHPS_RETURN_IF_ERROR(ReadVarintIndices(field, bytes, idx));
  }
  SKETCHPS_RETURN_IF_ERROR(CheckIncreasingBelow(field, idx, dim));
  return idx;
}

// Sizes were checked: count <= limits.max_count and bytes.size() == ValueArrayBytes(count).
absl::StatusOr<std::vector<float>> ReadValues(absl::string_view field, const std::string& bytes, std::uint64_t count,
                                              ValueEncoding encoding, bool allow_nonfinite) {
  std::vector<float> val(count);
  if (encoding == ValueEncoding::kF32) {
    codec_internal::LoadLE32(bytes.data(), val.size(), val.data());
  } else if (encoding == ValueEncoding::kF16) {
    for (std::size_t i = 0; i < val.size(); ++i) val[i] = HalfBitsToFloat(codec_internal::LoadLE16(&bytes[2 * i]));
  } else {
    for (std::size_t i = 0; i < val.size(); ++i) {
      val[i] = BFloat16BitsToFloat(codec_internal::LoadLE16(&bytes[2 * i]));
    }
  }
  if (!allow_nonfinite) {
    for (std::size_t i = 0; i < val.size(); ++i) {
      if (!std::isfinite(val[i])) return Invalid(field, "non-finite value ", val[i], " at position ", i);
    }
  }
  return val;
}

absl::Status CheckSketchShape(const v1::SketchPayload& in, const SketchShape& want) {
  if (in.rows() != want.rows) return Invalid("sketch.rows", in.rows(), " != expected ", want.rows);
  if (in.cols() != want.cols) return Invalid("sketch.cols", in.cols(), " != expected ", want.cols);
  if (in.seed() != want.seed) return Invalid("sketch.seed", in.seed(), " != expected ", want.seed);
  if (in.dim() != want.dim) return Invalid("sketch.dim", in.dim(), " != expected ", want.dim);
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<PayloadBody> AsBody(absl::StatusOr<T> decoded) {
  if (!decoded.ok()) return std::move(decoded).status();
  return PayloadBody(std::move(decoded).value());
}

}  // namespace

absl::StatusOr<DenseValues> DecodeDense(const v1::DensePayload& in, const DecodeLimits& limits) {
  SKETCHPS_ASSIGN_OR_RETURN(const ValueEncoding venc, ParseValueEncoding("dense.value_encoding", in.value_encoding()));
  SKETCHPS_RETURN_IF_ERROR(CheckCount("dense.count", in.count(), limits));
  SKETCHPS_RETURN_IF_ERROR(CheckValueBytes("dense.values", in.values().size(), in.count(), venc));
  DenseValues out;
  SKETCHPS_ASSIGN_OR_RETURN(out.values,
                            ReadValues("dense.values", in.values(), in.count(), venc, limits.allow_nonfinite));
  return out;
}

absl::StatusOr<SparseVector> DecodeSparse(const v1::SparsePayload& in, const DecodeLimits& limits) {
  SKETCHPS_ASSIGN_OR_RETURN(const IndexEncoding ienc, ParseIndexEncoding("sparse.index_encoding", in.index_encoding()));
  SKETCHPS_ASSIGN_OR_RETURN(const ValueEncoding venc, ParseValueEncoding("sparse.value_encoding", in.value_encoding()));
  SKETCHPS_RETURN_IF_ERROR(CheckDim("sparse.dim", in.dim(), limits));
  SKETCHPS_RETURN_IF_ERROR(CheckIndexCount("sparse.count", in.count(), in.dim(), limits));
  SKETCHPS_RETURN_IF_ERROR(CheckIndexBytes("sparse.indices", in.indices().size(), in.count(), ienc));
  SKETCHPS_RETURN_IF_ERROR(CheckValueBytes("sparse.values", in.values().size(), in.count(), venc));
  SparseVector out;
  out.dim = in.dim();
  SKETCHPS_ASSIGN_OR_RETURN(out.idx, ReadIndices("sparse.indices", in.indices(), in.count(), in.dim(), ienc));
  SKETCHPS_ASSIGN_OR_RETURN(out.val,
                            ReadValues("sparse.values", in.values(), in.count(), venc, limits.allow_nonfinite));
  return out;
}

absl::StatusOr<SketchTable> DecodeSketch(const v1::SketchPayload& in, const DecodeLimits& limits) {
  if (limits.expected_sketch.has_value()) SKETCHPS_RETURN_IF_ERROR(CheckSketchShape(in, *limits.expected_sketch));
  SKETCHPS_RETURN_IF_ERROR(CheckDim("sketch.dim", in.dim(), limits));
  const std::uint64_t cells = std::uint64_t{in.rows()} * in.cols();
  if (cells > limits.max_count) {
    return Invalid("sketch.rows * sketch.cols", in.rows(), " * ", in.cols(), " = ", cells, " cells exceed max_count ",
                   limits.max_count);
  }
  SKETCHPS_ASSIGN_OR_RETURN(const ValueEncoding venc, ParseValueEncoding("sketch.value_encoding", in.value_encoding()));
  SKETCHPS_RETURN_IF_ERROR(CheckValueBytes("sketch.table", in.table().size(), cells, venc));
  SketchTable out;
  out.rows = in.rows();
  out.cols = in.cols();
  out.seed = in.seed();
  out.dim = in.dim();
  SKETCHPS_ASSIGN_OR_RETURN(out.table, ReadValues("sketch.table", in.table(), cells, venc, limits.allow_nonfinite));
  return out;
}

absl::StatusOr<IndexSet> DecodeIndexSet(const v1::IndexSetPayload& in, const DecodeLimits& limits) {
  SKETCHPS_ASSIGN_OR_RETURN(const IndexEncoding ienc,
                            ParseIndexEncoding("index_set.index_encoding", in.index_encoding()));
  SKETCHPS_RETURN_IF_ERROR(CheckDim("index_set.dim", in.dim(), limits));
  SKETCHPS_RETURN_IF_ERROR(CheckIndexCount("index_set.count", in.count(), in.dim(), limits));
  SKETCHPS_RETURN_IF_ERROR(CheckIndexBytes("index_set.indices", in.indices().size(), in.count(), ienc));
  IndexSet out;
  out.dim = in.dim();
  SKETCHPS_ASSIGN_OR_RETURN(out.idx, ReadIndices("index_set.indices", in.indices(), in.count(), in.dim(), ienc));
  return out;
}

absl::StatusOr<DecodedPayload> DecodePayload(const v1::Payload& in, const DecodeLimits& limits) {
  absl::StatusOr<PayloadBody> body;
  switch (in.body_case()) {
    case v1::Payload::kDense: body = AsBody(DecodeDense(in.dense(), limits)); break;
    case v1::Payload::kSparse: body = AsBody(DecodeSparse(in.sparse(), limits)); break;
    case v1::Payload::kSketch: body = AsBody(DecodeSketch(in.sketch(), limits)); break;
    case v1::Payload::kIndexSet: body = AsBody(DecodeIndexSet(in.index_set(), limits)); break;
    case v1::Payload::BODY_NOT_SET:
      return Invalid("payload.body", "empty oneof (expected one of dense, sparse, sketch, index_set)");
  }
  if (!body.ok()) return std::move(body).status();
  return DecodedPayload{in.header(), std::move(body).value()};
}

std::string F32Bytes(std::span<const float> values) {
  std::string out(values.size() * 4, '\0');
  codec_internal::StoreLE32(values.data(), values.size(), out.data());
  return out;
}

absl::StatusOr<std::vector<float>> ParseF32Bytes(const std::string& bytes, std::uint64_t count, absl::string_view field,
                                                 bool allow_nonfinite) {
  if (bytes.size() != count * 4) {
    return Invalid(field, bytes.size(), " bytes, expected ", count * 4, " (", count, " float32 values)");
  }
  return ReadValues(field, bytes, count, ValueEncoding::kF32, allow_nonfinite);
}

}  // namespace sketchps
