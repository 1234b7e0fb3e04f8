// Fuzz harness: payload codecs (common/wire/codec.h through engine/phase_proto.h), as a shard receives them:
// bytes -> sketchps.v1.PushPullRequest -> SpecFromProto + DecodeBody for a range of kRange.
// Invariants: refusals are named; an accepted body stays within the range's limits, re-encodes
// (EncodeBody) and decodes back to the same value; the spec round-trips through SpecToProto.
#include <variant>

#include "common/overloaded.h"
#include "engine/phase_proto.h"
#include "fuzz/fuzz_target.h"

namespace {

constexpr char kHarness[] = "payload_fuzz";
constexpr std::uint64_t kRange = 64;
constexpr std::uint32_t kWorkers = 4;

std::uint64_t Entries(const sketchps::PayloadValue& v) {
  return std::visit(sketchps::Overloaded{
                        [](const sketchps::DenseValues& d) -> std::uint64_t { return d.values.size(); },
                        [](const sketchps::SparseVector& s) -> std::uint64_t { return s.idx.size(); },
                        [](const sketchps::SketchTable& t) -> std::uint64_t {
                          return t.table.size() / sketchps::kSketchCellsPerElement;
                        },
                        [](const sketchps::IndexSet& s) -> std::uint64_t { return s.idx.size(); },
                    },
                    v);
}

void CheckValue(const sketchps::PayloadValue& value) {
  using namespace sketchps;
  fuzz::Require(Entries(value) <= kRange, kHarness, "a decoded body larger than the range");
  v1::Payload again;
  const absl::Status encoded = EncodeBody(value, &again);
  fuzz::Require(encoded.ok(), kHarness, "an accepted body does not re-encode: " + encoded.ToString());
  auto back = DecodeBody(again, kRange);
  fuzz::Require(back.ok() && back->has_value(), kHarness,
                "a re-encoded body does not decode: " + back.status().ToString());
  fuzz::Require(**back == value, kHarness, "a body changed in a re-encode round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sketchps;
  v1::PushPullRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  (void)MeasureWireBytes(request.payload());
  auto spec = SpecFromProto(request.spec(), kWorkers, kRange);
  fuzz::RequireNamed(spec.status(), kHarness);
  if (spec.ok()) {
    auto again = SpecFromProto(SpecToProto(*spec), kWorkers, kRange);
    fuzz::Require(again.ok() && again->keep == spec->keep && again->reduction == spec->reduction, kHarness,
                  "a spec changed in a round trip");
  }
  auto body = DecodeBody(request.payload(), kRange);
  fuzz::RequireNamed(body.status(), kHarness);
  if (!body.ok()) return 0;
  if (body->has_value()) CheckValue(**body);
  // The same bytes under the relaxed limits a gradient dump uses (non-finite values allowed).
  DecodeLimits relaxed = DecodeLimits::ForRange(kRange);
  relaxed.allow_nonfinite = true;
  fuzz::RequireNamed(DecodePayload(request.payload(), relaxed).status(), kHarness);
  if (spec.ok()) fuzz::NoteAccepted();
  return 0;
}
