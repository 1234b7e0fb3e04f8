// What the ShardHost files (ps/shard_host*.cc) share and nothing else uses: the errors that name a
// request's field, and the decoding of a final result carried in a Join or a checkpoint. Not part of
// the ps/ library's public surface.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/shard.h"
#include "sketchps/v1/parameter_server.pb.h"

namespace sketchps::ps::host_fields {

// FAILED_PRECONDITION "<field>: <what>".
inline absl::Status Precondition(absl::string_view field, absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(field, ": ", what));
}
// INVALID_ARGUMENT "<field>: <what>".
inline absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// Decodes a final result carried in a Join or a checkpoint (header: round and phase) over a range of
// range_len entries; INVALID_ARGUMENT naming `field` when it has no body or a phase out of range.
absl::StatusOr<FinalResult> DecodeFinal(const v1::Payload& payload, std::uint32_t contributors, std::uint64_t range_len,
                                        absl::string_view field);

}  // namespace sketchps::ps::host_fields
