#include "common/wire/layout_proto.h"

#include "absl/strings/str_cat.h"

namespace sketchps {

void LayersToProto(const LayerTable& table, google::protobuf::RepeatedPtrField<v1::LayerInfo>* out) {
  out->Clear();
  for (const auto& l : table.layers) {
    auto* info = out->Add();
    info->set_name(l.name);
    info->set_offset(l.offset);
    info->set_numel(l.numel);
    for (auto d : l.shape) info->add_shape(d);
  }
}

absl::StatusOr<LayerTable> LayersFromProto(const google::protobuf::RepeatedPtrField<v1::LayerInfo>& in,
                                           absl::string_view field) {
  if (in.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": empty layer table"));
  if (static_cast<std::size_t>(in.size()) > kMaxLayers) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", in.size(), " layers, more than ", kMaxLayers));
  }
  LayerTable table;
  for (int i = 0; i < in.size(); ++i) {
    const auto& info = in[i];
    if (info.shape_size() > 8) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "].shape: ", info.shape_size(), " dimensions, at most 8"));
    }
    table.layers.push_back(Layer{info.name(), info.offset(), info.numel(), {info.shape().begin(), info.shape().end()}});
  }
  if (auto st = ValidateLayerTable(table); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", st.message()));
  }
  return table;
}

bool SameLayers(const LayerTable& a, const LayerTable& b) {
  if (a.layers.size() != b.layers.size()) return false;
  for (std::size_t i = 0; i < a.layers.size(); ++i) {
    const auto &x = a.layers[i], &y = b.layers[i];
    if (x.name != y.name || x.offset != y.offset || x.numel != y.numel || x.shape != y.shape) return false;
  }
  return true;
}

}  // namespace sketchps
