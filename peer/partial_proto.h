// Partial states as protobuf messages: Partial <-> the items and contributor count of a
// sketchps.v1.ExchangeRequest (proto/sketchps/v1/peer.proto).
//
// DecodePartial treats the request as hostile. Besides DecodeBody's limits (counts and dims bounded
// by the shard's range, finite values, nothing allocated beyond them) it checks the shape the
// schedule implies for the sender at that step: which ranks its state covers (`block`, from
// SentBlock), one item per covered rank (all-gather), one item for sums and tree merges, the leader's
// item exactly when the block contains the leader; payload kinds matching the reduction; sparse,
// sketch and index-set payloads over exactly the range (dim == range_len); and a contributor count
// consistent with the items. Errors are InvalidArgument naming the field ("items[2].origin: ...").
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "peer/partial.h"
#include "sketchps/v1/peer.pb.h"

namespace sketchps::peer {

// Sets out's contributors and items (not its header, step or spec). An item's dense or sparse values
// travel in `values` (the rank's Contribution::values) when they are all exact in it (a rank's own
// rounded contribution, a gathered one), else as binary32 (a partial sum): engine/phase_proto.h EncodeBody.
absl::Status EncodePartial(const Partial& partial, v1::ExchangeRequest* out,
                           ValueEncoding values = ValueEncoding::kF32);

// Raw payload bytes of a partial (RawPayloadBytes summed over its items).
std::uint64_t RawPartialBytes(const Partial& partial);

absl::StatusOr<Partial> DecodePartial(const v1::ExchangeRequest& in, Collective c, const PhaseSpec& spec,
                                      const std::vector<std::uint32_t>& block, std::uint64_t range_len);

}  // namespace sketchps::peer
