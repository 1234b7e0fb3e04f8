// The layer table (common/layout.h) <-> sketchps.v1.LayerInfo lists (JoinRequest.layers,
// ShardCheckpoint.layers, GradientDump.layers).
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/layout.h"
#include "sketchps/v1/parameter_server.pb.h"

namespace sketchps {

inline constexpr std::size_t kMaxLayers = 1 << 16;

void LayersToProto(const LayerTable& table, google::protobuf::RepeatedPtrField<v1::LayerInfo>* out);
// Validates (ValidateLayerTable, at most kMaxLayers layers of at most 8 dimensions); errors name
// `field`, e.g. "layers[3]".
absl::StatusOr<LayerTable> LayersFromProto(const google::protobuf::RepeatedPtrField<v1::LayerInfo>& in,
                                           absl::string_view field = "layers");
bool SameLayers(const LayerTable& a, const LayerTable& b);

}  // namespace sketchps
