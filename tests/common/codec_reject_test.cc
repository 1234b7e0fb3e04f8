// Rejection tests of the payload codecs: every malformed input yields INVALID_ARGUMENT with a
// message that starts with the offending field's path.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/bf16.h"
#include "common/wire/codec.h"
#include "support/codec_reference.h"

namespace v1 = sketchps::v1;
using sketchps::DecodeLimits;
using sketchps::IndexEncoding;
using sketchps::kBFloat16Max;
using sketchps::ValueEncoding;
using sketchps::testing::RefF32;
using sketchps::testing::RefLE32;

namespace {

// INVALID_ARGUMENT, message "<field>: ...", containing `detail`.
void RequireInvalid(const absl::Status& s, const std::string& field, const std::string& detail = "") {
  INFO(s.ToString());
  REQUIRE(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(s.message()).rfind(field + ": ", 0) == 0);
  CHECK(std::string(s.message()).find(detail) != std::string::npos);
}

template <typename T>
void RequireInvalid(const absl::StatusOr<T>& r, const std::string& field, const std::string& detail = "") {
  RequireInvalid(r.status(), field, detail);
}

const DecodeLimits kLimits = DecodeLimits::ForRange(65536);

v1::SparsePayload Sparse(std::vector<std::uint32_t> idx, std::vector<float> val, std::uint64_t dim = 65536) {
  v1::SparsePayload p;
  p.set_count(static_cast<std::uint32_t>(idx.size()));
  p.set_dim(dim);
  p.set_indices(RefLE32(idx));
  p.set_values(RefF32(val));
  return p;
}

v1::SparsePayload Varint(std::uint32_t count, const std::string& bytes) {
  v1::SparsePayload p;
  p.set_count(count);
  p.set_dim(std::numeric_limits<std::uint32_t>::max());
  p.set_index_encoding(v1::INDEX_DELTA_VARINT);
  p.set_indices(bytes);
  p.set_values(std::string(4 * count, '\0'));
  return p;
}

DecodeLimits Wide() { return DecodeLimits::ForRange(sketchps::kMaxPayloadDim); }

}  // namespace

TEST_CASE("Decoders reject truncated, extended and miscounted arrays", "[codec]") {
  v1::SparsePayload p = Sparse({1, 2, 3}, {1, 2, 3});
  SECTION("truncated indices") {
    p.mutable_indices()->pop_back();
    RequireInvalid(sketchps::DecodeSparse(p, kLimits), "sparse.indices", "11 bytes, expected count 3 x 4 = 12");
  }
  SECTION("extra value bytes") {
    p.mutable_values()->push_back('\0');
    RequireInvalid(sketchps::DecodeSparse(p, kLimits), "sparse.values", "13 bytes");
  }
  SECTION("count larger than the arrays") {
    p.set_count(4);
    RequireInvalid(sketchps::DecodeSparse(p, kLimits), "sparse.indices");
  }
  SECTION("f16 values need 2 bytes each") {
    p.set_value_encoding(v1::VALUE_F16);
    RequireInvalid(sketchps::DecodeSparse(p, kLimits), "sparse.values", "expected count 3 x 2 = 6");
  }
  SECTION("bf16 values need 2 bytes each") {
    p.set_value_encoding(v1::VALUE_BF16);
    RequireInvalid(sketchps::DecodeSparse(p, kLimits), "sparse.values", "12 bytes, expected count 3 x 2 = 6");
  }
  SECTION("bf16 arrays: truncated, an odd byte count, one value too many") {
    v1::DensePayload d;
    REQUIRE(sketchps::EncodeDense({{1.0f, 2.0f, 3.0f}}, ValueEncoding::kBF16, &d).ok());
    REQUIRE(d.values().size() == 6);
    REQUIRE(sketchps::DecodeDense(d, kLimits).ok());
    v1::DensePayload truncated = d;
    truncated.mutable_values()->resize(4);
    RequireInvalid(sketchps::DecodeDense(truncated, kLimits), "dense.values", "4 bytes, expected count 3 x 2 = 6");
    v1::DensePayload odd = d;
    odd.mutable_values()->pop_back();
    RequireInvalid(sketchps::DecodeDense(odd, kLimits), "dense.values", "5 bytes, expected count 3 x 2 = 6");
    v1::DensePayload longer = d;
    longer.mutable_values()->append(2, '\0');
    RequireInvalid(sketchps::DecodeDense(longer, kLimits), "dense.values", "8 bytes, expected count 3 x 2 = 6");
    v1::SparsePayload sp = Sparse({1, 2, 3}, {1, 2, 3});
    sp.set_value_encoding(v1::VALUE_BF16);
    sp.set_values(std::string(7, '\0'));
    RequireInvalid(sketchps::DecodeSparse(sp, kLimits), "sparse.values", "7 bytes, expected count 3 x 2 = 6");
  }
  SECTION("dense and sketch tables") {
    v1::DensePayload d;
    d.set_count(2);
    d.set_values(std::string(7, '\0'));
    RequireInvalid(sketchps::DecodeDense(d, kLimits), "dense.values", "7 bytes");
    v1::SketchPayload s;
    s.set_rows(2);
    s.set_cols(3);
    s.set_table(std::string(25, '\0'));
    RequireInvalid(sketchps::DecodeSketch(s, kLimits), "sketch.table", "expected count 6 x 4 = 24");
  }
  SECTION("index set") {
    v1::IndexSetPayload s;
    s.set_count(2);
    s.set_dim(10);
    s.set_indices(RefLE32({1}));
    RequireInvalid(sketchps::DecodeIndexSet(s, kLimits), "index_set.indices", "4 bytes");
  }
}

TEST_CASE("Decoders reject indices out of range or out of order", "[codec]") {
  const auto ienc = GENERATE(IndexEncoding::kRawU32, IndexEncoding::kDeltaVarint);
  auto encode = [&](std::vector<std::uint32_t> idx) {
    v1::SparsePayload p = Sparse(idx, std::vector<float>(idx.size(), 1.0f));
    p.set_index_encoding(ienc == IndexEncoding::kRawU32 ? v1::INDEX_RAW_U32 : v1::INDEX_DELTA_VARINT);
    if (ienc == IndexEncoding::kDeltaVarint) {  // gaps computed by hand, allowing "negative" ones
      std::string bytes;
      std::uint32_t prev = 0;
      for (const std::uint32_t i : idx) {
        bytes += sketchps::testing::RefVarint(i - prev);
        prev = i;
      }
      p.set_indices(bytes);
    }
    return p;
  };
  RequireInvalid(sketchps::DecodeSparse(encode({1, 2, 3, 70000}), kLimits), "sparse.indices",
                 "index 70000 at position 3 >= dim 65536");
  RequireInvalid(sketchps::DecodeSparse(encode({1, 5, 5}), kLimits), "sparse.indices",
                 "index 5 at position 2 is not greater than the previous index 5");
  if (ienc == IndexEncoding::kRawU32) {  // a decreasing index is a huge gap under delta coding
    RequireInvalid(sketchps::DecodeSparse(encode({1, 5, 3}), kLimits), "sparse.indices",
                   "index 3 at position 2 is not greater than the previous index 5");
  }
  v1::IndexSetPayload set;
  set.set_count(2);
  set.set_dim(4);
  set.set_indices(RefLE32({2, 4}));
  RequireInvalid(sketchps::DecodeIndexSet(set, kLimits), "index_set.indices", "index 4 at position 1 >= dim 4");
}

TEST_CASE("Decoders reject non-finite values unless allowed", "[codec]") {
  const float bad = GENERATE(std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY);
  DecodeLimits allow = kLimits;
  allow.allow_nonfinite = true;
  SECTION("sparse f32, f16 and bf16") {
    const auto venc = GENERATE(ValueEncoding::kF32, ValueEncoding::kF16, ValueEncoding::kBF16);
    v1::SparsePayload p;
    REQUIRE(sketchps::EncodeSparse({10, {1, 2}, {1.0f, bad}}, {IndexEncoding::kRawU32, venc}, &p).ok());
    RequireInvalid(sketchps::DecodeSparse(p, kLimits), "sparse.values", "non-finite value");
    CHECK(std::string(sketchps::DecodeSparse(p, kLimits).status().message()).find("at position 1") !=
          std::string::npos);
    const auto ok = sketchps::DecodeSparse(p, allow);
    REQUIRE(ok.ok());
    CHECK(std::isnan(bad) == std::isnan(ok->val[1]));
    if (!std::isnan(bad)) CHECK(ok->val[1] == bad);
  }
  SECTION("dense and sketch") {
    v1::DensePayload d;
    REQUIRE(sketchps::EncodeDense({{bad}}, ValueEncoding::kF16, &d).ok());
    RequireInvalid(sketchps::DecodeDense(d, kLimits), "dense.values", "non-finite value");
    CHECK(sketchps::DecodeDense(d, allow).ok());
    v1::SketchPayload s;
    REQUIRE(sketchps::EncodeSketch({1, 2, 0, 5, {0.0f, bad}}, sketchps::ValueEncoding::kF32, &s).ok());
    RequireInvalid(sketchps::DecodeSketch(s, kLimits), "sketch.table", "at position 1");
    CHECK(sketchps::DecodeSketch(s, allow).ok());
  }
}

TEST_CASE("Decoders enforce max_dim, max_count and count <= dim", "[codec]") {
  v1::SparsePayload p = Sparse({1}, {1.0f}, 65537);
  RequireInvalid(sketchps::DecodeSparse(p, kLimits), "sparse.dim", "65537 exceeds max_dim 65536");
  p = Sparse({0, 1, 2}, {1, 2, 3}, 2);
  RequireInvalid(sketchps::DecodeSparse(p, kLimits), "sparse.count", "3 exceeds dim 2");
  DecodeLimits tight = kLimits;
  tight.max_count = 2;
  p = Sparse({0, 1, 2}, {1, 2, 3});
  RequireInvalid(sketchps::DecodeSparse(p, tight), "sparse.count", "3 exceeds max_count 2");
  v1::DensePayload d;
  d.set_count(3);
  RequireInvalid(sketchps::DecodeDense(d, tight), "dense.count", "exceeds max_count");
  v1::SketchPayload s;
  s.set_rows(2);
  s.set_cols(2);
  RequireInvalid(sketchps::DecodeSketch(s, tight), "sketch.rows * sketch.cols", "exceed max_count 2");
  s.set_dim(70000);
  RequireInvalid(sketchps::DecodeSketch(s, kLimits), "sketch.dim", "exceeds max_dim");
  v1::IndexSetPayload set;
  set.set_dim(1u << 20);
  RequireInvalid(sketchps::DecodeIndexSet(set, kLimits), "index_set.dim", "exceeds max_dim");
  // Default limits accept nothing but empty payloads.
  RequireInvalid(sketchps::DecodeSparse(Sparse({0}, {1.0f}, 1), DecodeLimits{}), "sparse.dim");
  CHECK(sketchps::DecodeDense(v1::DensePayload{}, DecodeLimits{}).ok());
}

TEST_CASE("Declared-size bombs are rejected by the size checks, before any allocation", "[codec]") {
  // Generous limits, so that only the checks that run before the allocation can stop these.
  DecodeLimits huge;
  huge.max_dim = std::uint64_t{1} << 41;
  huge.max_count = std::uint64_t{1} << 33;
  v1::SparsePayload p = Sparse({}, {}, std::uint64_t{1} << 40);
  RequireInvalid(sketchps::DecodeSparse(p, huge), "sparse.dim", "exceeds the uint32 index range");
  p = Sparse({}, {}, sketchps::kMaxPayloadDim);
  p.set_count(1u << 31);
  p.set_indices(std::string(10, '\x01'));
  RequireInvalid(sketchps::DecodeSparse(p, huge), "sparse.indices", "10 bytes, expected count 2147483648 x 4");
  p.set_index_encoding(v1::INDEX_DELTA_VARINT);
  RequireInvalid(sketchps::DecodeSparse(p, huge), "sparse.indices", "10 bytes cannot hold count 2147483648 varints");
  v1::DensePayload d;
  d.set_count(1u << 31);
  d.set_values(std::string(10, '\0'));
  RequireInvalid(sketchps::DecodeDense(d, huge), "dense.values", "10 bytes");
  v1::SketchPayload s;
  s.set_rows(1u << 16);
  s.set_cols(1u << 16);
  s.set_table(std::string(10, '\0'));
  RequireInvalid(sketchps::DecodeSketch(s, huge), "sketch.table", "10 bytes, expected count 4294967296 x 4");
  huge.max_count = std::numeric_limits<std::uint64_t>::max();  // rows * cols * 4 wraps around 2^64
  s.set_rows(0xFFFFFFFFu);
  s.set_cols(0xFFFFFFFFu);
  s.set_table(std::string(4, '\0'));
  RequireInvalid(sketchps::DecodeSketch(s, huge), "sketch.table", "overflows");
  s.set_rows(1u << 31);
  s.set_cols(1u << 31);  // 2^62 cells: 2^64 bytes wraps to 0
  s.set_table("");
  RequireInvalid(sketchps::DecodeSketch(s, huge), "sketch.table", "overflows");
  v1::IndexSetPayload set;
  set.set_count(1u << 31);
  set.set_dim(sketchps::kMaxPayloadDim);
  set.set_indices(std::string(10, '\x01'));
  RequireInvalid(sketchps::DecodeIndexSet(set, huge), "index_set.indices", "10 bytes");
}

TEST_CASE("Sketch shape must match the expected shape", "[codec]") {
  v1::SketchPayload s;
  REQUIRE(sketchps::EncodeSketch({2, 3, 7, 100, std::vector<float>(6, 1.0f)}, sketchps::ValueEncoding::kF32, &s).ok());
  DecodeLimits limits = kLimits;
  limits.expected_sketch = sketchps::SketchShape{2, 3, 7, 100};
  REQUIRE(sketchps::DecodeSketch(s, limits).ok());
  limits.expected_sketch = sketchps::SketchShape{5, 3, 7, 100};
  RequireInvalid(sketchps::DecodeSketch(s, limits), "sketch.rows", "2 != expected 5");
  limits.expected_sketch = sketchps::SketchShape{2, 4, 7, 100};
  RequireInvalid(sketchps::DecodeSketch(s, limits), "sketch.cols", "3 != expected 4");
  limits.expected_sketch = sketchps::SketchShape{2, 3, 8, 100};
  RequireInvalid(sketchps::DecodeSketch(s, limits), "sketch.seed", "7 != expected 8");
  limits.expected_sketch = sketchps::SketchShape{2, 3, 7, 101};
  RequireInvalid(sketchps::DecodeSketch(s, limits), "sketch.dim", "100 != expected 101");
}

TEST_CASE("Decoders reject unknown enum values and an empty oneof", "[codec]") {
  v1::SparsePayload p = Sparse({1}, {1.0f});
  p.set_index_encoding(static_cast<v1::IndexEncoding>(7));
  RequireInvalid(sketchps::DecodeSparse(p, kLimits), "sparse.index_encoding", "unknown enum value 7");
  p = Sparse({1}, {1.0f});
  p.set_value_encoding(static_cast<v1::ValueEncoding>(-1));
  RequireInvalid(sketchps::DecodeSparse(p, kLimits), "sparse.value_encoding", "unknown enum value -1");
  v1::DensePayload d;
  d.set_value_encoding(static_cast<v1::ValueEncoding>(3));  // VALUE_BF16 = 2 is the last known value
  RequireInvalid(sketchps::DecodeDense(d, kLimits), "dense.value_encoding");
  v1::IndexSetPayload set;
  set.set_index_encoding(static_cast<v1::IndexEncoding>(3));
  RequireInvalid(sketchps::DecodeIndexSet(set, kLimits), "index_set.index_encoding");
  RequireInvalid(sketchps::DecodePayload(v1::Payload{}, kLimits), "payload.body", "empty oneof");
  v1::Payload payload;
  *payload.mutable_sparse() = p;
  RequireInvalid(sketchps::DecodePayload(payload, kLimits), "sparse.value_encoding");
}

TEST_CASE("Varint index streams must be canonical 32-bit varints using every byte", "[codec]") {
  const DecodeLimits wide = Wide();
  RequireInvalid(sketchps::DecodeSparse(Varint(1, "\xFF\xFF\xFF\xFF\x1F"), wide), "sparse.indices",
                 "varint 8589934591 at position 0 overflows 32 bits");
  RequireInvalid(sketchps::DecodeSparse(Varint(2, std::string("\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x01", 10)), wide),
                 "sparse.indices", "overflows 32 bits");
  RequireInvalid(sketchps::DecodeSparse(Varint(2, "\xFF\xFF\xFF\xFF\x0F\x01"), wide), "sparse.indices",
                 "index at position 1 overflows 2^32");
  RequireInvalid(sketchps::DecodeSparse(Varint(1, "\x80\x80\x80\x80\x80"), wide), "sparse.indices",
                 "truncated or unterminated varint at position 0");
  RequireInvalid(sketchps::DecodeSparse(Varint(2, "\x05\x85"), wide), "sparse.indices",
                 "truncated or unterminated varint at position 1");
  RequireInvalid(sketchps::DecodeSparse(Varint(1, std::string("\x80\x00", 2)), wide), "sparse.indices",
                 "over-long varint at position 0 (2 bytes for 0)");
  RequireInvalid(sketchps::DecodeSparse(Varint(1, "\x05\x01"), wide), "sparse.indices",
                 "1 trailing bytes after 1 varints");
  RequireInvalid(sketchps::DecodeSparse(Varint(2, std::string("\x05\x00", 2)), wide), "sparse.indices",
                 "not greater than the previous index 5");
  RequireInvalid(sketchps::DecodeSparse(Varint(2, std::string("\xFE\xFF\xFF\xFF\x0F\x00", 6)), wide), "sparse.indices",
                 "index 4294967294 at position 1 is not greater than the previous index 4294967294");
  REQUIRE(sketchps::DecodeSparse(Varint(2, "\xFD\xFF\xFF\xFF\x0F\x01"), wide).ok());
}

TEST_CASE("Encoders reject invalid in-memory payloads and leave the output cleared", "[codec]") {
  v1::SparsePayload p;
  p.set_count(99);
  RequireInvalid(sketchps::EncodeSparse({10, {1, 2}, {1.0f}}, {}, &p), "SparseVector.val", "size 1 != idx size 2");
  CHECK(p.count() == 0);
  RequireInvalid(sketchps::EncodeSparse({10, {1, 10}, {1.0f, 2.0f}}, {}, &p), "SparseVector.idx",
                 "index 10 at position 1 >= dim 10");
  RequireInvalid(sketchps::EncodeSparse({10, {3, 1, 3}, {1.0f, 2.0f, 3.0f}}, {}, &p), "SparseVector.idx",
                 "duplicate index 3 at positions 0 and 2");
  RequireInvalid(sketchps::EncodeSparse({std::uint64_t{1} << 32, {1}, {1.0f}}, {}, &p), "SparseVector.dim",
                 "4294967296 exceeds the uint32 index range");
  RequireInvalid(sketchps::EncodeSparse({10, {1}, {70000.0f}}, {IndexEncoding::kRawU32, ValueEncoding::kF16}, &p),
                 "SparseVector.val", "overflows binary16");
  CHECK(p.values().empty());
  v1::SketchPayload s;
  RequireInvalid(sketchps::EncodeSketch({2, 2, 0, 4, {1.0f}}, sketchps::ValueEncoding::kF32, &s), "SketchTable.table",
                 "size 1 != rows * cols");
  v1::IndexSetPayload set;
  RequireInvalid(sketchps::EncodeIndexSet({4, {0, 0}}, IndexEncoding::kDeltaVarint, &set), "IndexSet.idx",
                 "duplicate index 0");
  v1::DensePayload d;
  RequireInvalid(sketchps::EncodeDense({{-1e9f}}, ValueEncoding::kF16, &d), "DenseValues.values", "overflows binary16");
  // bfloat16 has binary32's range: only the last half-binade below FLT_MAX overflows.
  CHECK(sketchps::EncodeDense({{-1e9f, 1e38f, -kBFloat16Max}}, ValueEncoding::kBF16, &d).ok());
  RequireInvalid(sketchps::EncodeDense({{1.0f, FLT_MAX}}, ValueEncoding::kBF16, &d), "DenseValues.values",
                 "value 3.40282e+38 at position 1 overflows bfloat16");
  CHECK(d.values().empty());
  RequireInvalid(sketchps::EncodeSparse({10, {1}, {-0x1.ffp127f}}, {IndexEncoding::kRawU32, ValueEncoding::kBF16}, &p),
                 "SparseVector.val", "overflows bfloat16");
}
