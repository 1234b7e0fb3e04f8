// Randomized mutation test of the payload decoders (fixed seeds): valid encodings with flipped,
// truncated or extended bytes and rewritten scalars either decode to a valid object or fail with
// INVALID_ARGUMENT naming a field; nothing else, and never a crash (run it under the asan preset
// for the memory-safety half of that claim).
#include <cstdint>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "common/wire/codec.h"
#include "google/protobuf/stubs/logging.h"
#include "support/codec_reference.h"

namespace v1 = sketchps::v1;
using sketchps::DecodeLimits;
using sketchps::IndexEncoding;
using sketchps::ValueEncoding;
using sketchps::testing::AllFinite;
using sketchps::testing::IncreasingBelow;

namespace {

const DecodeLimits kLimits = DecodeLimits::ForRange(4096);

// One valid payload of every kind and encoding, with small arrays.
std::vector<v1::Payload> Seeds() {
  std::vector<v1::Payload> seeds;
  const sketchps::SparseVector sparse{4096, {0, 3, 127, 128, 300, 4000, 4095}, {1, -2, 3, 0.5f, -0.25f, 7, 1e-3f}};
  for (const auto ienc : {IndexEncoding::kRawU32, IndexEncoding::kDeltaVarint}) {
    for (const auto venc : {ValueEncoding::kF32, ValueEncoding::kF16}) {
      v1::Payload p;
      REQUIRE(sketchps::EncodeSparse(sparse, {ienc, venc}, p.mutable_sparse()).ok());
      seeds.push_back(p);
    }
    v1::Payload p;
    REQUIRE(sketchps::EncodeIndexSet({4096, sparse.idx}, ienc, p.mutable_index_set()).ok());
    seeds.push_back(p);
  }
  for (const auto venc : {ValueEncoding::kF32, ValueEncoding::kF16}) {
    v1::Payload p;
    REQUIRE(sketchps::EncodeDense({{1.0f, -3.5f, 2.0f, 0.0f, 9.0f}}, venc, p.mutable_dense()).ok());
    seeds.push_back(p);
  }
  v1::Payload p;
  p.mutable_header()->set_job_id("job");
  REQUIRE(sketchps::EncodeSketch({3, 4, 11, 4096, std::vector<float>(12, 0.5f)}, sketchps::ValueEncoding::kF32,
                                 p.mutable_sketch())
              .ok());
  seeds.push_back(p);
  return seeds;
}

struct ValidBody {
  const DecodeLimits& lim;
  bool operator()(const sketchps::DenseValues& d) const {
    return d.values.size() <= lim.max_count && AllFinite(d.values);
  }
  bool operator()(const sketchps::SparseVector& s) const {
    return s.idx.size() == s.val.size() && s.idx.size() <= lim.max_count && s.dim <= lim.max_dim &&
           IncreasingBelow(s.idx, s.dim) && AllFinite(s.val);
  }
  bool operator()(const sketchps::SketchTable& t) const {
    return t.table.size() == std::uint64_t{t.rows} * t.cols && t.table.size() <= lim.max_count &&
           t.dim <= lim.max_dim && AllFinite(t.table);
  }
  bool operator()(const sketchps::IndexSet& s) const {
    return s.idx.size() <= lim.max_count && s.dim <= lim.max_dim && IncreasingBelow(s.idx, s.dim);
  }
};

bool NamesAField(absl::string_view message) {
  for (const char* prefix : {"dense.", "sparse.", "sketch.", "index_set.", "payload.body: "}) {
    if (absl::StartsWith(message, prefix)) return true;
  }
  return false;
}

struct Tally {
  int accepted = 0;
  int rejected = 0;
  int bad = 0;

  void Record(const v1::Payload& p) {
    const auto r = sketchps::DecodePayload(p, kLimits);
    bool good;
    if (r.ok()) {
      good = std::visit(ValidBody{kLimits}, r->body);
      ++accepted;
    } else {
      good = r.status().code() == absl::StatusCode::kInvalidArgument && NamesAField(r.status().message());
      ++rejected;
    }
    if (!good && ++bad <= 5) FAIL_CHECK("bad outcome " << r.status() << " for " << p.ShortDebugString());
  }
};

// Flips, truncates or extends one string.
void MutateBytes(std::string* s, std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0:
    case 1:  // flip 1-3 bytes
      for (int k = 1 + static_cast<int>(rng() % 3); k > 0 && !s->empty(); --k) {
        (*s)[rng() % s->size()] ^= static_cast<char>(1 + rng() % 255);
      }
      break;
    case 2:  // truncate
      s->resize(s->empty() ? 0 : rng() % s->size());
      break;
    default:  // extend with random bytes
      for (int k = 1 + static_cast<int>(rng() % 8); k > 0; --k) s->push_back(static_cast<char>(rng()));
  }
}

std::uint64_t InterestingNumber(std::uint64_t current, std::mt19937_64& rng) {
  const std::uint64_t choices[] = {0, 1, current - 1, current + 1, 4096, 4097, 0xFFFFFFFFull, 1ull << 40, rng()};
  return choices[rng() % 9];
}

// Rewrites one scalar field (count, dim, rows, cols, an encoding) of the body.
void MutateScalar(v1::Payload* p, std::mt19937_64& rng) {
  const auto n = [&](std::uint64_t v) { return InterestingNumber(v, rng); };
  const auto u32 = [&](std::uint64_t v) { return static_cast<std::uint32_t>(n(v)); };
  const int enum_value = static_cast<int>(rng() % 5) - 1;  // -1..3: two known values, three unknown
  const int which = static_cast<int>(rng() % 3);
  if (p->has_sparse()) {
    auto* s = p->mutable_sparse();
    if (which == 0) s->set_count(u32(s->count()));
    if (which == 1) s->set_dim(n(s->dim()));
    if (which == 2)
      (rng() % 2 ? s->set_index_encoding(static_cast<v1::IndexEncoding>(enum_value))
                 : s->set_value_encoding(static_cast<v1::ValueEncoding>(enum_value)));
  } else if (p->has_index_set()) {
    auto* s = p->mutable_index_set();
    if (which == 0) s->set_count(u32(s->count()));
    if (which == 1) s->set_dim(n(s->dim()));
    if (which == 2) s->set_index_encoding(static_cast<v1::IndexEncoding>(enum_value));
  } else if (p->has_dense()) {
    auto* d = p->mutable_dense();
    (which == 0 ? d->set_count(u32(d->count())) : d->set_value_encoding(static_cast<v1::ValueEncoding>(enum_value)));
  } else if (p->has_sketch()) {
    auto* s = p->mutable_sketch();
    if (which == 0) s->set_rows(u32(s->rows()));
    if (which == 1) s->set_cols(u32(s->cols()));
    if (which == 2) s->set_dim(n(s->dim()));
  }
}

std::vector<std::string*> ArrayFields(v1::Payload* p) {
  if (p->has_sparse()) return {p->mutable_sparse()->mutable_indices(), p->mutable_sparse()->mutable_values()};
  if (p->has_index_set()) return {p->mutable_index_set()->mutable_indices()};
  if (p->has_dense()) return {p->mutable_dense()->mutable_values()};
  return {p->mutable_sketch()->mutable_table()};
}

}  // namespace

TEST_CASE("Seeds of the mutation test decode", "[codec]") {
  for (const v1::Payload& p : Seeds()) CHECK(sketchps::DecodePayload(p, kLimits).ok());
}

TEST_CASE("Mutated array fields and scalars decode validly or are rejected", "[codec]") {
  const std::vector<v1::Payload> seeds = Seeds();
  std::mt19937_64 rng(0xC0DEC);
  Tally tally;
  for (int iter = 0; iter < 20000; ++iter) {
    v1::Payload p = seeds[rng() % seeds.size()];
    for (int m = 1 + static_cast<int>(rng() % 2); m > 0; --m) {
      if (rng() % 3 == 0) {
        MutateScalar(&p, rng);
      } else {
        std::vector<std::string*> fields = ArrayFields(&p);
        MutateBytes(fields[rng() % fields.size()], rng);
      }
    }
    tally.Record(p);
  }
  CHECK(tally.bad == 0);
  CHECK(tally.accepted > 100);  // byte flips inside values/indices often stay valid
  CHECK(tally.rejected > 5000);
}

TEST_CASE("Mutated serialized payloads decode validly or are rejected", "[codec]") {
  // Parsing mutated strings makes protobuf log "invalid UTF-8" errors; keep the test output clean.
  google::protobuf::LogHandler* previous = google::protobuf::SetLogHandler(nullptr);
  const std::vector<v1::Payload> seeds = Seeds();
  std::mt19937_64 rng(0x5EED);
  Tally tally;
  int unparsable = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string bytes = seeds[rng() % seeds.size()].SerializeAsString();
    MutateBytes(&bytes, rng);
    v1::Payload p;
    if (!p.ParseFromString(bytes)) {
      ++unparsable;
      continue;
    }
    tally.Record(p);
  }
  google::protobuf::SetLogHandler(previous);
  CHECK(tally.bad == 0);
  CHECK(tally.accepted > 100);
  CHECK(tally.rejected > 100);
  CHECK(unparsable < 20000);
}
