// Round trips, exact wire bytes and byte accounting of the payload codecs. Rejections are in
// codec_reject_test.cc, the randomized mutation test in codec_mutation_test.cc.
#include "common/wire/codec.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "common/bf16.h"
#include "common/fp16.h"
#include "common/wire/codec_wire.h"
#include "support/codec_reference.h"

namespace v1 = sketchps::v1;
using sketchps::DecodeLimits;
using sketchps::IndexEncoding;
using sketchps::ValueEncoding;
using sketchps::testing::RefDeltaVarint;
using sketchps::testing::RefF32;
using sketchps::testing::RefLE32;

namespace {

constexpr std::uint64_t kDimMax = sketchps::kMaxPayloadDim;  // 2^32 - 1
const DecodeLimits kWide = DecodeLimits::ForRange(kDimMax);

// f16 round trip of one value, computed element-wise: what the decoder must return.
float ThroughHalf(float v) { return sketchps::HalfBitsToFloat(sketchps::FloatToHalfBits(v)); }

// bf16 round trip of one value from the independent nearest-value reference.
float ThroughBFloat16(float v) {
  static const sketchps::testing::NearestBFloat16 nearest;
  return static_cast<float>(sketchps::testing::BFloat16ClosedForm(nearest(v)));
}

std::vector<float> Expected(const std::vector<float>& v, ValueEncoding enc) {
  std::vector<float> out(v);
  if (enc == ValueEncoding::kF16) {
    for (float& x : out) x = ThroughHalf(x);
  }
  if (enc == ValueEncoding::kBF16) {
    for (float& x : out) x = ThroughBFloat16(x);
  }
  return out;
}

// The little-endian bytes of bfloat16 values: the top 16 bits of the nearest bfloat16's float.
std::string RefBF16(const std::vector<float>& values) {
  std::string out;
  for (const float v : values) {
    const std::uint32_t bits = sketchps::testing::FloatBits(ThroughBFloat16(v)) >> 16;
    out.push_back(static_cast<char>(bits & 0xFF));
    out.push_back(static_cast<char>(bits >> 8));
  }
  return out;
}

std::vector<float> RandomValues(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

struct IdxCase {
  std::uint64_t dim;
  std::vector<std::uint32_t> idx;
};

std::vector<IdxCase> IndexCases() {
  return {
      {0, {}},                                                                // empty range
      {1, {}},                                                                // count 0
      {1, {0}},                                                               // dim 1
      {65536, {0, 1, 127, 128, 16511, 16512, 65535}},                         // varint size boundaries
      {kDimMax, {0, 1, 0x7FFFFFFFu, 0xFFFFFFFCu, 0xFFFFFFFDu, 0xFFFFFFFEu}},  // near 2^32 - 1
  };
}

}  // namespace

TEST_CASE("Sparse payloads round-trip under every encoding", "[codec]") {
  const auto ienc = GENERATE(IndexEncoding::kRawU32, IndexEncoding::kDeltaVarint);
  const auto venc = GENERATE(ValueEncoding::kF32, ValueEncoding::kF16, ValueEncoding::kBF16);
  for (const IdxCase& c : IndexCases()) {
    const sketchps::SparseVector in{c.dim, c.idx, RandomValues(c.idx.size(), c.dim)};
    v1::SparsePayload wire;
    REQUIRE(sketchps::EncodeSparse(in, {ienc, venc}, &wire).ok());
    CHECK(wire.count() == c.idx.size());
    CHECK(wire.dim() == c.dim);
    CHECK(wire.indices() == (ienc == IndexEncoding::kRawU32 ? RefLE32(c.idx) : RefDeltaVarint(c.idx)));
    if (venc == ValueEncoding::kF32) CHECK(wire.values() == RefF32(in.val));
    if (venc == ValueEncoding::kBF16) CHECK(wire.values() == RefBF16(in.val));
    CHECK(wire.values().size() == sketchps::ValueArrayBytes(c.idx.size(), venc));
    const auto out = sketchps::DecodeSparse(wire, kWide);
    REQUIRE(out.ok());
    CHECK(out->dim == c.dim);
    CHECK(out->idx == c.idx);
    CHECK(out->val == Expected(in.val, venc));
  }
}

TEST_CASE("Index sets round-trip under both index encodings", "[codec]") {
  const auto ienc = GENERATE(IndexEncoding::kRawU32, IndexEncoding::kDeltaVarint);
  for (const IdxCase& c : IndexCases()) {
    v1::IndexSetPayload wire;
    REQUIRE(sketchps::EncodeIndexSet({c.dim, c.idx}, ienc, &wire).ok());
    CHECK(wire.indices() == (ienc == IndexEncoding::kRawU32 ? RefLE32(c.idx) : RefDeltaVarint(c.idx)));
    CHECK(wire.indices().size() == sketchps::IndexArrayBytes(c.idx, ienc));
    const auto out = sketchps::DecodeIndexSet(wire, kWide);
    REQUIRE(out.ok());
    CHECK(*out == sketchps::IndexSet{c.dim, c.idx});
  }
}

TEST_CASE("Dense payloads round-trip under every value encoding", "[codec]") {
  const auto venc = GENERATE(ValueEncoding::kF32, ValueEncoding::kF16, ValueEncoding::kBF16);
  const auto n = GENERATE(0, 1, 1000);
  const sketchps::DenseValues in{RandomValues(n, 7)};
  v1::DensePayload wire;
  REQUIRE(sketchps::EncodeDense(in, venc, &wire).ok());
  CHECK(wire.values().size() == static_cast<std::size_t>(n) * (venc == ValueEncoding::kF32 ? 4 : 2));
  if (venc == ValueEncoding::kF32) CHECK(wire.values() == RefF32(in.values));
  if (venc == ValueEncoding::kBF16) CHECK(wire.values() == RefBF16(in.values));
  CHECK(wire.value_encoding() == (venc == ValueEncoding::kBF16  ? v1::VALUE_BF16
                                  : venc == ValueEncoding::kF16 ? v1::VALUE_F16
                                                                : v1::VALUE_F32));
  const auto out = sketchps::DecodeDense(wire, DecodeLimits::ForRange(1000));
  REQUIRE(out.ok());
  CHECK(out->values == Expected(in.values, venc));
}

TEST_CASE("f16 values stay within half precision of the input", "[codec]") {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-27, 14);  // below the subnormals up to 2^15
  std::vector<float> v(5000);
  for (float& x : v) x = std::ldexp(rng() % 2 ? mantissa(rng) : -mantissa(rng), exponent(rng));
  v.push_back(0.0f);
  v.push_back(-0.0f);
  v.push_back(65504.0f);
  v1::DensePayload wire;
  REQUIRE(sketchps::EncodeDense({v}, ValueEncoding::kF16, &wire).ok());
  const auto out = sketchps::DecodeDense(wire, DecodeLimits::ForRange(v.size()));
  REQUIRE(out.ok());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double err = std::fabs(static_cast<double>(out->values[i]) - v[i]);
    // Half of the spacing: 2^-11 relative for normals, 2^-25 absolute in the subnormal range.
    CHECK(err <= std::max(std::fabs(static_cast<double>(v[i])) * 0x1p-11, 0x1p-25));
    CHECK(std::signbit(out->values[i]) == std::signbit(v[i]));
  }
}

TEST_CASE("bf16 values keep the float exponent range and stay within 2^-9 relative", "[codec]") {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-149, 127);  // the float subnormals up to the largest binade
  std::vector<float> v(5000);
  for (float& x : v) x = std::ldexp(rng() % 2 ? mantissa(rng) : -mantissa(rng), exponent(rng));
  for (const float x : {0.0f, -0.0f, sketchps::kBFloat16Max, -sketchps::kBFloat16Max, 1e-40f, 65520.0f, 1e30f}) {
    v.push_back(x);
  }
  v1::DensePayload wire;
  REQUIRE(sketchps::EncodeDense({v}, ValueEncoding::kBF16, &wire).ok());
  const auto out = sketchps::DecodeDense(wire, DecodeLimits::ForRange(v.size()));
  REQUIRE(out.ok());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const long double err = std::fabs(static_cast<long double>(out->values[i]) - v[i]);
    // Half of the spacing: 2^-8 relative for normals (8 significant bits), 2^-134 absolute below 2^-126.
    CHECK(err <= std::max(std::fabs(static_cast<long double>(v[i])) * 0x1p-8L, 0x1p-134L));
    CHECK(std::signbit(out->values[i]) == std::signbit(v[i]));
    CHECK(out->values[i] == ThroughBFloat16(v[i]));
  }
}

TEST_CASE("ExactIn and RoundValues agree with the formats", "[codec]") {
  std::vector<float> v = RandomValues(1000, 11);
  CHECK(sketchps::ExactIn(v, ValueEncoding::kF32));
  CHECK_FALSE(sketchps::ExactIn(v, ValueEncoding::kBF16));
  CHECK_FALSE(sketchps::ExactIn(v, ValueEncoding::kF16));
  std::vector<float> b = v;
  CHECK(sketchps::RoundValues(b, ValueEncoding::kBF16));
  CHECK(b == Expected(v, ValueEncoding::kBF16));
  CHECK(sketchps::ExactIn(b, ValueEncoding::kBF16));
  std::vector<float> h = v;
  CHECK(sketchps::RoundValues(h, ValueEncoding::kF16));
  CHECK(h == Expected(v, ValueEncoding::kF16));
  CHECK(sketchps::ExactIn(h, ValueEncoding::kF16));
  // 1 + 2^-10 is a half but not a bfloat16; 2^20 is a bfloat16 but beyond the half range.
  CHECK(sketchps::ExactIn(std::vector<float>{1.0f + 0x1p-10f}, ValueEncoding::kF16));
  CHECK_FALSE(sketchps::ExactIn(std::vector<float>{1.0f + 0x1p-10f}, ValueEncoding::kBF16));
  CHECK(sketchps::ExactIn(std::vector<float>{0x1p20f}, ValueEncoding::kBF16));
  CHECK_FALSE(sketchps::ExactIn(std::vector<float>{0x1p20f}, ValueEncoding::kF16));
  CHECK_FALSE(sketchps::ExactIn(std::vector<float>{INFINITY}, ValueEncoding::kBF16));
  // Values beyond the format, or not finite, are left as they are and make RoundValues false.
  std::vector<float> big{1.0f + 0x1p-12f, FLT_MAX, 70000.0f};
  CHECK_FALSE(sketchps::RoundValues(big, ValueEncoding::kBF16));
  CHECK(big == std::vector<float>{1.0f, FLT_MAX, 70144.0f});
  std::vector<float> f32{0.1f};
  CHECK(sketchps::RoundValues(f32, ValueEncoding::kF32));
  CHECK(f32[0] == 0.1f);
  CHECK(sketchps::ValueBytes(ValueEncoding::kBF16) == 2);
  CHECK(sketchps::ValueArrayBytes(7, ValueEncoding::kBF16) == 14);
  CHECK(std::string(sketchps::ValueEncodingName(ValueEncoding::kBF16)) == "bf16");
}

TEST_CASE("Sketch tables round-trip with their shape", "[codec]") {
  const sketchps::SketchTable cases[] = {
      {0, 0, 0, 0, {}},
      {1, 1, 42, 1, {-1.5f}},
      {3, 7, std::numeric_limits<std::uint64_t>::max(), kDimMax, RandomValues(21, 5)},
  };
  for (const auto& in : cases) {
    v1::SketchPayload wire;
    REQUIRE(sketchps::EncodeSketch(in, sketchps::ValueEncoding::kF32, &wire).ok());
    CHECK(wire.table() == RefF32(in.table));
    CHECK(wire.table().size() == sketchps::SketchArrayBytes(in.rows, in.cols));
    DecodeLimits limits = kWide;
    limits.expected_sketch = sketchps::SketchShape{in.rows, in.cols, in.seed, in.dim};
    const auto out = sketchps::DecodeSketch(wire, limits);
    REQUIRE(out.ok());
    CHECK(*out == in);
  }
}

TEST_CASE("Sketch tables exact in binary16 travel in half the bytes and decode to the same values", "[codec]") {
  const sketchps::SketchTable exact{2, 3, 9, 50, {0.5f, -1.25f, 0.0f, 65504.0f, 0.0009765625f, 2.0f}};
  CHECK(sketchps::ExactInHalf(exact.table));
  v1::SketchPayload wire;
  REQUIRE(sketchps::EncodeSketch(exact, sketchps::ValueEncoding::kF16, &wire).ok());
  CHECK(wire.table().size() == sketchps::SketchArrayBytes(2, 3, sketchps::ValueEncoding::kF16));
  CHECK(wire.table().size() == 12);
  const auto out = sketchps::DecodeSketch(wire, kWide);
  REQUIRE(out.ok());
  CHECK(*out == exact);
  CHECK_FALSE(sketchps::ExactInHalf(std::vector<float>{0.1f}));      // needs more mantissa
  CHECK_FALSE(sketchps::ExactInHalf(std::vector<float>{70000.0f}));  // beyond the half range
  CHECK_FALSE(sketchps::ExactInHalf(std::vector<float>{std::numeric_limits<float>::infinity()}));
  v1::SketchPayload wrong = wire;
  wrong.set_value_encoding(static_cast<v1::ValueEncoding>(7));
  CHECK_THAT(std::string(sketchps::DecodeSketch(wrong, kWide).status().message()),
             Catch::Contains("sketch.value_encoding"));
}

TEST_CASE("The encoders sort unsorted input", "[codec]") {
  const auto ienc = GENERATE(IndexEncoding::kRawU32, IndexEncoding::kDeltaVarint);
  const sketchps::SparseVector in{100, {50, 3, 99, 0, 7}, {5.0f, 0.3f, 9.9f, 0.5f, -7.0f}};
  v1::SparsePayload wire;
  REQUIRE(sketchps::EncodeSparse(in, {ienc, ValueEncoding::kF32}, &wire).ok());
  const auto out = sketchps::DecodeSparse(wire, DecodeLimits::ForRange(100));
  REQUIRE(out.ok());
  CHECK(out->idx == std::vector<std::uint32_t>{0, 3, 7, 50, 99});
  CHECK(out->val == std::vector<float>{0.5f, 0.3f, -7.0f, 5.0f, 9.9f});

  v1::IndexSetPayload set;
  REQUIRE(sketchps::EncodeIndexSet({100, {9, 2, 5}}, ienc, &set).ok());
  const auto decoded = sketchps::DecodeIndexSet(set, DecodeLimits::ForRange(100));
  REQUIRE(decoded.ok());
  CHECK(decoded->idx == std::vector<std::uint32_t>{2, 5, 9});
  CHECK(sketchps::IndexArrayBytes(std::vector<std::uint32_t>{9, 2, 5}, ienc) == set.indices().size());
}

TEST_CASE("DecodePayload dispatches on the oneof and keeps the header", "[codec]") {
  v1::Payload p;
  p.mutable_header()->set_job_id("job");
  p.mutable_header()->set_round(17);
  p.mutable_header()->set_phase(1);
  const sketchps::IndexSet set{10, {1, 4}};
  REQUIRE(sketchps::EncodeIndexSet(set, IndexEncoding::kDeltaVarint, p.mutable_index_set()).ok());
  auto out = sketchps::DecodePayload(p, DecodeLimits::ForRange(10));
  REQUIRE(out.ok());
  CHECK(out->header.job_id() == "job");
  CHECK(out->header.round() == 17);
  REQUIRE(std::holds_alternative<sketchps::IndexSet>(out->body));
  CHECK(std::get<sketchps::IndexSet>(out->body) == set);

  REQUIRE(sketchps::EncodeDense({{1.0f, 2.0f}}, ValueEncoding::kF16, p.mutable_dense()).ok());
  out = sketchps::DecodePayload(p, DecodeLimits::ForRange(10));
  REQUIRE(out.ok());
  REQUIRE(std::holds_alternative<sketchps::DenseValues>(out->body));
  CHECK(std::get<sketchps::DenseValues>(out->body).values == std::vector<float>{1.0f, 2.0f});
}

TEST_CASE("Wire bytes match the promised array sizes", "[codec]") {
  v1::Payload p;
  p.mutable_header()->set_job_id("a-job-name");
  p.mutable_header()->set_epoch(3);
  SECTION("sketch: rows * cols * 4 bytes plus header and bounded overhead") {
    const sketchps::SketchTable t{5, 1000, 99, 1u << 20, RandomValues(5000, 1)};
    REQUIRE(sketchps::EncodeSketch(t, sketchps::ValueEncoding::kF32, p.mutable_sketch()).ok());
    const auto bytes = sketchps::MeasureWireBytes(p);
    CHECK(bytes.arrays == 5 * 1000 * 4);
    CHECK(bytes.total == p.SerializeAsString().size());
    CHECK(bytes.header == p.header().ByteSizeLong() + 2);
    CHECK(bytes.overhead() <= sketchps::kMaxBodyOverheadBytes);
  }
  SECTION("sparse: count * (4 + value size) for raw indices") {
    const auto venc = GENERATE(ValueEncoding::kF32, ValueEncoding::kF16, ValueEncoding::kBF16);
    std::vector<std::uint32_t> idx(300);
    for (std::uint32_t i = 0; i < idx.size(); ++i) idx[i] = i * 1000;
    REQUIRE(sketchps::EncodeSparse({1u << 20, idx, RandomValues(300, 2)}, {IndexEncoding::kRawU32, venc},
                                   p.mutable_sparse())
                .ok());
    const auto bytes = sketchps::MeasureWireBytes(p);
    CHECK(bytes.arrays == 300 * (4 + (venc == ValueEncoding::kF32 ? 4 : 2)));
    CHECK(bytes.total == p.SerializeAsString().size());
    CHECK(bytes.overhead() <= sketchps::kMaxBodyOverheadBytes);
  }
  SECTION("delta+varint indices: gaps of 1000 take 2 bytes each, the first (0) takes 1") {
    std::vector<std::uint32_t> idx(300);
    for (std::uint32_t i = 0; i < idx.size(); ++i) idx[i] = i * 1000;
    CHECK(sketchps::IndexArrayBytes(idx, IndexEncoding::kDeltaVarint) == 1 + 299 * 2);
  }
}

TEST_CASE("kMaxBodyOverheadBytes bounds the overhead of every body kind", "[codec]") {
  // Every scalar at its maximum. Each bytes field here is short (1-byte length prefix); a real one
  // of up to 2^32 * 5 bytes has a length prefix of at most 5 bytes, hence + 4 per bytes field.
  constexpr std::uint32_t kU32 = std::numeric_limits<std::uint32_t>::max();
  v1::Payload p;
  auto* s = p.mutable_sketch();
  s->set_rows(kU32);
  s->set_cols(kU32);
  s->set_seed(std::numeric_limits<std::uint64_t>::max());
  s->set_dim(kDimMax);
  s->set_table("t");
  CHECK(sketchps::MeasureWireBytes(p).overhead() + 4 + 4 <= sketchps::kMaxBodyOverheadBytes);  // + oneof length
  auto* sp = p.mutable_sparse();
  sp->set_count(kU32);
  sp->set_dim(kDimMax);
  sp->set_index_encoding(v1::INDEX_DELTA_VARINT);
  sp->set_value_encoding(v1::VALUE_F16);
  sp->set_indices("i");
  sp->set_values("v");
  CHECK(sketchps::MeasureWireBytes(p).overhead() + 4 + 4 + 4 <= sketchps::kMaxBodyOverheadBytes);
}

TEST_CASE("The byte-wise (big-endian host) array path writes the same little-endian bytes", "[codec]") {
  namespace ci = sketchps::codec_internal;
  const std::vector<std::uint32_t> words{0, 1, 0x01020304u, 0xFFFFFFFFu, 0x80000000u};
  std::string bytes(words.size() * 4, '\0');
  ci::StoreLE32Bytewise(words.data(), words.size(), bytes.data());
  CHECK(bytes == RefLE32(words));
  std::vector<std::uint32_t> back(words.size());
  ci::LoadLE32Bytewise(bytes.data(), back.size(), back.data());
  CHECK(back == words);
  const std::vector<float> values{1.0f, -0.0f, 3.5e-42f, -INFINITY, 65504.0f};
  std::string fbytes(values.size() * 4, '\0');
  ci::StoreLE32Bytewise(values.data(), values.size(), fbytes.data());
  CHECK(fbytes == RefF32(values));
  std::vector<float> fback(values.size());
  ci::LoadLE32Bytewise(fbytes.data(), fback.size(), fback.data());
  for (std::size_t i = 0; i < values.size(); ++i) {
    CHECK(sketchps::testing::FloatBits(fback[i]) == sketchps::testing::FloatBits(values[i]));
  }
  CHECK(ci::LoadLE16("\x34\x12") == 0x1234);
  char two[2];
  ci::StoreLE16(0xABCD, two);
  CHECK((static_cast<unsigned char>(two[0]) == 0xCD && static_cast<unsigned char>(two[1]) == 0xAB));
}
