// Payload encoders and byte accounting (see codec.h). The decoders live in codec_decode.cc.
#include "common/wire/codec.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/bf16.h"
#include "common/fp16.h"
#include "common/status.h"
#include "common/wire/codec_wire.h"
#include "google/protobuf/io/coded_stream.h"

namespace sketchps {
namespace {

using codec_internal::Invalid;
using google::protobuf::io::CodedOutputStream;

constexpr std::uint64_t kMaxCount = std::numeric_limits<std::uint32_t>::max();

v1::IndexEncoding ToProto(IndexEncoding e) {
  return e == IndexEncoding::kDeltaVarint ? v1::INDEX_DELTA_VARINT : v1::INDEX_RAW_U32;
}
v1::ValueEncoding ToProto(ValueEncoding e) {
  switch (e) {
    case ValueEncoding::kF16: return v1::VALUE_F16;
    case ValueEncoding::kBF16: return v1::VALUE_BF16;
    case ValueEncoding::kF32: break;
  }
  return v1::VALUE_F32;
}

// One value's 16-bit pattern under kF16 or kBF16, and the largest finite value of that format.
std::uint16_t To16Bits(float v, ValueEncoding encoding) {
  return encoding == ValueEncoding::kBF16 ? FloatToBFloat16Bits(v) : FloatToHalfBits(v);
}
float Max16(ValueEncoding encoding) { return encoding == ValueEncoding::kBF16 ? kBFloat16Max : kHalfMax; }
const char* Name16(ValueEncoding encoding) { return encoding == ValueEncoding::kBF16 ? "bfloat16" : "binary16"; }

bool StrictlyIncreasing(std::span<const std::uint32_t> idx) {
  return std::adjacent_find(idx.begin(), idx.end(), std::greater_equal<>()) == idx.end();
}

absl::Status CheckDim(absl::string_view field, std::uint64_t dim) {
  if (dim > kMaxPayloadDim) return Invalid(field, dim, " exceeds the uint32 index range ", kMaxPayloadDim);
  return absl::OkStatus();
}

// Every index < dim.
absl::Status CheckIndicesBelow(absl::string_view field, std::span<const std::uint32_t> idx, std::uint64_t dim) {
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] >= dim) return Invalid(field, "index ", idx[i], " at position ", i, " >= dim ", dim);
  }
  return absl::OkStatus();
}

// The permutation that sorts idx ascending; fails on a duplicate index.
absl::StatusOr<std::vector<std::uint32_t>> SortingOrder(absl::string_view field, std::span<const std::uint32_t> idx) {
  std::vector<std::uint32_t> order(idx.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return idx[a] < idx[b]; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    if (idx[order[i]] == idx[order[i - 1]]) {
      return Invalid(field, "duplicate index ", idx[order[i]], " at positions ", std::min(order[i - 1], order[i]),
                     " and ", std::max(order[i - 1], order[i]));
    }
  }
  return order;
}

template <typename T>
std::vector<T> Gather(std::span<const T> src, const std::vector<std::uint32_t>& order) {
  std::vector<T> out(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) out[i] = src[order[i]];
  return out;
}

// Writes strictly increasing indices in the chosen encoding.
void WriteIndices(std::span<const std::uint32_t> idx, IndexEncoding encoding, std::string* out) {
  out->resize(IndexArrayBytes(idx, encoding));
  if (encoding == IndexEncoding::kRawU32) {
    codec_internal::StoreLE32(idx.data(), idx.size(), out->data());
    return;
  }
  auto* p = reinterpret_cast<std::uint8_t*>(out->data());
  std::uint32_t prev = 0;
  for (const std::uint32_t i : idx) {
    p = CodedOutputStream::WriteVarint32ToArray(i - prev, p);  // the first "gap" is the index itself
    prev = i;
  }
}

// Writes values in the chosen encoding; under kF16 and kBF16 a finite value that rounds to infinity
// fails.
absl::Status WriteValues(absl::string_view field, std::span<const float> val, ValueEncoding encoding,
                         std::string* out) {
  out->resize(ValueArrayBytes(val.size(), encoding));
  if (encoding == ValueEncoding::kF32) {
    codec_internal::StoreLE32(val.data(), val.size(), out->data());
    return absl::OkStatus();
  }
  // The exponent field: all ones is an infinity or a NaN, which a finite value must not become.
  const std::uint16_t exponent = encoding == ValueEncoding::kBF16 ? 0x7F80u : 0x7C00u;
  for (std::size_t i = 0; i < val.size(); ++i) {
    const std::uint16_t h = To16Bits(val[i], encoding);
    if ((h & exponent) == exponent && std::isfinite(val[i])) {
      return Invalid(field, "value ", val[i], " at position ", i, " overflows ", Name16(encoding), " (largest finite ",
                     Max16(encoding), ")");
    }
    codec_internal::StoreLE16(h, out->data() + 2 * i);
  }
  return absl::OkStatus();
}

absl::Status FillSparse(const SparseVector& in, const EncodeOptions& options, v1::SparsePayload* out) {
  if (in.idx.size() != in.val.size()) {
    return Invalid("SparseVector.val", "size ", in.val.size(), " != idx size ", in.idx.size());
  }
  SKETCHPS_RETURN_IF_ERROR(CheckDim("SparseVector.dim", in.dim));
  SKETCHPS_RETURN_IF_ERROR(CheckIndicesBelow("SparseVector.idx", in.idx, in.dim));
  std::vector<std::uint32_t> sorted_idx;
  std::vector<float> sorted_val;
  std::span<const std::uint32_t> idx = in.idx;
  std::span<const float> val = in.val;
  if (!StrictlyIncreasing(idx)) {
    SKETCHPS_ASSIGN_OR_RETURN(const std::vector<std::uint32_t> order, SortingOrder("SparseVector.idx", idx));
    sorted_idx = Gather(idx, order);
    sorted_val = Gather(val, order);
    idx = sorted_idx;
    val = sorted_val;
  }
  out->set_count(static_cast<std::uint32_t>(idx.size()));  // idx.size() <= dim < 2^32 (distinct, < dim)
  out->set_dim(in.dim);
  out->set_index_encoding(ToProto(options.index_encoding));
  out->set_value_encoding(ToProto(options.value_encoding));
  WriteIndices(idx, options.index_encoding, out->mutable_indices());
  return WriteValues("SparseVector.val", val, options.value_encoding, out->mutable_values());
}

absl::Status FillIndexSet(const IndexSet& in, IndexEncoding encoding, v1::IndexSetPayload* out) {
  SKETCHPS_RETURN_IF_ERROR(CheckDim("IndexSet.dim", in.dim));
  SKETCHPS_RETURN_IF_ERROR(CheckIndicesBelow("IndexSet.idx", in.idx, in.dim));
  std::vector<std::uint32_t> sorted_idx;
  std::span<const std::uint32_t> idx = in.idx;
  if (!StrictlyIncreasing(idx)) {
    SKETCHPS_ASSIGN_OR_RETURN(const std::vector<std::uint32_t> order, SortingOrder("IndexSet.idx", idx));
    sorted_idx = Gather(idx, order);
    idx = sorted_idx;
  }
  out->set_count(static_cast<std::uint32_t>(idx.size()));
  out->set_dim(in.dim);
  out->set_index_encoding(ToProto(encoding));
  WriteIndices(idx, encoding, out->mutable_indices());
  return absl::OkStatus();
}

// Runs fill on a cleared *out and clears it again when fill fails.
template <typename Msg, typename Fill>
absl::Status ClearedOnError(Msg* out, Fill fill) {
  out->Clear();
  absl::Status status = fill();
  if (!status.ok()) out->Clear();
  return status;
}

}  // namespace

absl::Status EncodeDense(const DenseValues& in, ValueEncoding value_encoding, v1::DensePayload* out) {
  return ClearedOnError(out, [&]() -> absl::Status {
    if (in.values.size() > kMaxCount) {
      return Invalid("DenseValues.values", "size ", in.values.size(), " exceeds the uint32 count ", kMaxCount);
    }
    out->set_count(static_cast<std::uint32_t>(in.values.size()));
    out->set_value_encoding(ToProto(value_encoding));
    return WriteValues("DenseValues.values", in.values, value_encoding, out->mutable_values());
  });
}

absl::Status EncodeSparse(const SparseVector& in, const EncodeOptions& options, v1::SparsePayload* out) {
  return ClearedOnError(out, [&] { return FillSparse(in, options, out); });
}

absl::Status EncodeSketch(const SketchTable& in, ValueEncoding value_encoding, v1::SketchPayload* out) {
  return ClearedOnError(out, [&]() -> absl::Status {
    const std::uint64_t cells = std::uint64_t{in.rows} * in.cols;
    if (in.table.size() != cells) {
      return Invalid("SketchTable.table", "size ", in.table.size(), " != rows * cols = ", in.rows, " * ", in.cols);
    }
    SKETCHPS_RETURN_IF_ERROR(CheckDim("SketchTable.dim", in.dim));
    out->set_rows(in.rows);
    out->set_cols(in.cols);
    out->set_seed(in.seed);
    out->set_dim(in.dim);
    out->set_value_encoding(ToProto(value_encoding));
    return WriteValues("SketchTable.table", in.table, value_encoding, out->mutable_table());
  });
}

absl::Status EncodeIndexSet(const IndexSet& in, IndexEncoding index_encoding, v1::IndexSetPayload* out) {
  return ClearedOnError(out, [&] { return FillIndexSet(in, index_encoding, out); });
}

std::uint64_t ValueBytes(ValueEncoding value_encoding) { return value_encoding == ValueEncoding::kF32 ? 4 : 2; }

const char* ValueEncodingName(ValueEncoding value_encoding) {
  switch (value_encoding) {
    case ValueEncoding::kF16: return "f16";
    case ValueEncoding::kBF16: return "bf16";
    case ValueEncoding::kF32: break;
  }
  return "f32";
}

std::uint64_t ValueArrayBytes(std::uint64_t count, ValueEncoding value_encoding) {
  return count * ValueBytes(value_encoding);
}

std::uint64_t IndexArrayBytes(std::span<const std::uint32_t> idx, IndexEncoding index_encoding) {
  if (index_encoding == IndexEncoding::kRawU32) return std::uint64_t{4} * idx.size();
  std::vector<std::uint32_t> sorted;
  if (!StrictlyIncreasing(idx)) {
    sorted.assign(idx.begin(), idx.end());
    std::sort(sorted.begin(), sorted.end());
    idx = sorted;
  }
  std::uint64_t bytes = 0;
  std::uint32_t prev = 0;
  for (const std::uint32_t i : idx) {
    bytes += CodedOutputStream::VarintSize32(i - prev);
    prev = i;
  }
  return bytes;
}

std::uint64_t SketchArrayBytes(std::uint32_t rows, std::uint32_t cols, ValueEncoding value_encoding) {
  return ValueArrayBytes(std::uint64_t{rows} * cols, value_encoding);
}

bool ExactInHalf(std::span<const float> values) {
  for (float v : values) {
    if (!(std::fabs(v) <= kHalfMax) || HalfBitsToFloat(FloatToHalfBits(v)) != v) return false;
  }
  return true;
}

bool ExactIn(std::span<const float> values, ValueEncoding value_encoding) {
  switch (value_encoding) {
    case ValueEncoding::kF32: return true;
    case ValueEncoding::kF16: return ExactInHalf(values);
    case ValueEncoding::kBF16:
      for (float v : values) {
        if (!(std::fabs(v) <= kBFloat16Max) || RoundToBFloat16(v) != v) return false;
      }
      return true;
  }
  return false;
}

bool RoundValues(std::span<float> values, ValueEncoding value_encoding) {
  if (value_encoding == ValueEncoding::kF32) return true;
  const float max = Max16(value_encoding);
  bool all = true;
  for (float& v : values) {
    if (std::fabs(v) <= max) {  // rounds to a finite value of the format
      v = value_encoding == ValueEncoding::kBF16 ? RoundToBFloat16(v) : HalfBitsToFloat(FloatToHalfBits(v));
    } else {
      all = false;  // beyond the format's largest finite value, or not finite: left as it is
    }
  }
  return all;
}

WireBytes MeasureWireBytes(const v1::Payload& payload) {
  WireBytes bytes;
  switch (payload.body_case()) {
    case v1::Payload::kDense: bytes.arrays = payload.dense().values().size(); break;
    case v1::Payload::kSparse:
      bytes.arrays = payload.sparse().indices().size() + payload.sparse().values().size();
      break;
    case v1::Payload::kSketch: bytes.arrays = payload.sketch().table().size(); break;
    case v1::Payload::kIndexSet: bytes.arrays = payload.index_set().indices().size(); break;
    case v1::Payload::BODY_NOT_SET: break;
  }
  if (payload.has_header()) {
    const std::size_t h = payload.header().ByteSizeLong();
    bytes.header = 1 + CodedOutputStream::VarintSize64(h) + h;  // tag of field 1, length, message
  }
  bytes.total = payload.ByteSizeLong();
  return bytes;
}

}  // namespace sketchps
