#include "peer/partial_proto.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/overloaded.h"
#include "common/status.h"
#include "engine/phase_proto.h"

namespace sketchps::peer {
namespace {

absl::Status Invalid(int i, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("items[", i, "]", what));
}

// The declared dim of a payload that has one (dense values have none).
std::optional<std::uint64_t> DimOf(const PayloadValue& p) {
  return std::visit(Overloaded{[](const DenseValues&) -> std::optional<std::uint64_t> { return std::nullopt; },
                               [](const SparseVector& v) -> std::optional<std::uint64_t> { return v.dim; },
                               [](const SketchTable& v) -> std::optional<std::uint64_t> { return v.dim; },
                               [](const IndexSet& v) -> std::optional<std::uint64_t> { return v.dim; }},
                    p);
}

absl::StatusOr<std::optional<PayloadValue>> DecodeItemPayload(const v1::PeerItem& item, int i, const PhaseSpec& spec,
                                                              std::uint64_t range_len) {
  auto body = DecodeBody(item.payload(), range_len);
  if (!body.ok()) return Invalid(i, absl::StrCat(".payload.", body.status().message()));
  if (!*body) return std::optional<PayloadValue>();
  const PayloadValue& p = **body;
  if (std::string(PayloadKindName(p)) != ExpectedKind(spec.reduction)) {
    return Invalid(
        i, absl::StrCat(".payload: ", PayloadKindName(p), " payload in a ", ReductionName(spec.reduction), " phase"));
  }
  if (auto dim = DimOf(p); dim && *dim != range_len) {
    return Invalid(i, absl::StrCat(".payload.", PayloadKindName(p), ".dim: ", *dim, " != range length ", range_len));
  }
  return body;
}

// The origins the items must carry, in order.
std::vector<std::uint32_t> ExpectedOrigins(Collective c, const PhaseSpec& spec,
                                           const std::vector<std::uint32_t>& block) {
  switch (c) {
    case Collective::kGather: return block;
    case Collective::kLeader:
      if (std::find(block.begin(), block.end(), spec.leader) != block.end()) return {spec.leader};
      return {};
    default: return {block.front()};
  }
}

}  // namespace

absl::Status EncodePartial(const Partial& partial, v1::ExchangeRequest* out, ValueEncoding values) {
  out->set_contributors(partial.contributors);
  out->clear_items();
  for (const auto& item : partial.items) {
    auto* msg = out->add_items();
    msg->set_origin(item.origin);
    if (item.payload) SKETCHPS_RETURN_IF_ERROR(EncodeBody(*item.payload, msg->mutable_payload(), values));
  }
  return absl::OkStatus();
}

std::uint64_t RawPartialBytes(const Partial& partial) {
  std::uint64_t bytes = 0;
  for (const auto& item : partial.items) bytes += item.payload ? RawPayloadBytes(*item.payload) : 0;
  return bytes;
}

absl::StatusOr<Partial> DecodePartial(const v1::ExchangeRequest& in, Collective c, const PhaseSpec& spec,
                                      const std::vector<std::uint32_t>& block, std::uint64_t range_len) {
  if (block.empty()) return absl::InvalidArgumentError("step: the sender sends nothing at this step");
  const std::vector<std::uint32_t> origins = ExpectedOrigins(c, spec, block);
  if (static_cast<std::size_t>(in.items_size()) != origins.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("items: ", in.items_size(), " items, expected ", origins.size(), " for a ", CollectiveName(c)));
  }
  if (in.contributors() > block.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("contributors: ", in.contributors(), " > the ", block.size(), " ranks the sender covers"));
  }
  Partial out;
  out.contributors = in.contributors();
  std::uint32_t with_body = 0;
  for (int i = 0; i < in.items_size(); ++i) {
    if (in.items(i).origin() != origins[i]) {
      return Invalid(i, absl::StrCat(".origin: ", in.items(i).origin(), ", expected rank ", origins[i]));
    }
    SKETCHPS_ASSIGN_OR_RETURN(auto payload, DecodeItemPayload(in.items(i), i, spec, range_len));
    with_body += payload ? 1 : 0;
    out.items.push_back(Item{origins[i], std::move(payload)});
  }
  const bool exact_count = c == Collective::kGather;
  const bool summed = c == Collective::kSum || c == Collective::kTreeTopK;
  if ((exact_count && with_body != out.contributors) || (summed && (with_body > 0) != (out.contributors > 0))) {
    return absl::InvalidArgumentError(
        absl::StrCat("contributors: ", out.contributors, " inconsistent with ", with_body, " payloads"));
  }
  return out;
}

}  // namespace sketchps::peer
