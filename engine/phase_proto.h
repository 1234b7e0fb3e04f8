// Phases as protobuf messages: PhaseSpec <-> sketchps.v1.PhaseSpecMsg and payload values <-> the body of a
// sketchps.v1.Payload, shared by the parameter-server client and server (and the peer mode).
//
// Receivers treat messages as hostile: SpecFromProto checks the enum and ranges, DecodeBody the
// payload (common/wire/codec.h) within limits derived from the range the receiver owns.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/layout.h"
#include "common/wire/codec.h"
#include "common/wire/layout_proto.h"
#include "engine/phase.h"
#include "sketchps/v1/parameter_server.pb.h"

namespace sketchps {

v1::PhaseSpecMsg SpecToProto(const PhaseSpec& spec);
// InvalidArgument naming the field ("spec.reduction", "spec.leader", "spec.keep") when the reduction
// is unknown, leader >= num_workers or keep > range_len.
absl::StatusOr<PhaseSpec> SpecFromProto(const v1::PhaseSpecMsg& msg, std::uint32_t num_workers,
                                        std::uint64_t range_len);

// Sets out's body (not its header) from `value`, losslessly: indices delta + varint coded, values
// binary32, except sketch tables whose every cell is exact in binary16 (a scheme that rounded its
// table, schemes/sketch_exchange.h), which travel as binary16, and dense or sparse values that are
// all exact in `values` (a worker's contribution rounded to scheme.values: Contribution::values),
// which travel in it. Values that are not all exact in `values` travel as binary32: a sum of
// rounded values (a phase result, a peer's partial sum) stays float32 whatever `values` says.
absl::Status EncodeBody(const PayloadValue& value, v1::Payload* out, ValueEncoding values = ValueEncoding::kF32);
// The body of `in` for a receiver owning range_len elements: dense, sparse and index-set arrays up to
// range_len entries over dim <= range_len, sketch tables up to kSketchCellsPerElement * range_len
// cells, finite values. No body: nullopt (a worker that skips the round).
absl::StatusOr<std::optional<PayloadValue>> DecodeBody(const v1::Payload& in, std::uint64_t range_len);

}  // namespace sketchps
