#include "job/model_layout.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sketchps {
namespace {

using Shapes = std::vector<std::pair<std::string, std::vector<std::int64_t>>>;

void Linear(Shapes& s, const std::string& name, std::int64_t in, std::int64_t out) {
  s.push_back({name + ".weight", {out, in}});
  s.push_back({name + ".bias", {out}});
}

void Conv(Shapes& s, const std::string& name, std::int64_t in, std::int64_t out, std::int64_t kernel, bool bias) {
  s.push_back({name + ".weight", {out, in, kernel, kernel}});
  if (bias) s.push_back({name + ".bias", {out}});
}

void GroupNorm(Shapes& s, const std::string& name, std::int64_t channels) {
  s.push_back({name + ".weight", {channels}});
  s.push_back({name + ".bias", {channels}});
}

// worker/models.cc registers, in this order: stem, stem_gn, fc, then block1..block4 (conv1, gn1,
// conv2, gn2, and down_conv + down_gn where the shape changes).
Shapes ResNet() {
  Shapes s;
  Conv(s, "stem", 1, 32, 3, false);
  GroupNorm(s, "stem_gn", 32);
  Linear(s, "fc", 256, 10);
  const std::int64_t widths[] = {32, 64, 128, 256};
  std::int64_t in = 32;
  for (int i = 0; i < 4; ++i) {
    const std::string block = absl::StrCat("block", i + 1);
    Conv(s, block + ".conv1", in, widths[i], 3, false);
    GroupNorm(s, block + ".gn1", widths[i]);
    Conv(s, block + ".conv2", widths[i], widths[i], 3, false);
    GroupNorm(s, block + ".gn2", widths[i]);
    if (in != widths[i]) {
      Conv(s, block + ".down_conv", in, widths[i], 1, false);
      GroupNorm(s, block + ".down_gn", widths[i]);
    }
    in = widths[i];
  }
  return s;
}

}  // namespace

const std::vector<std::string>& BuiltinModels() {
  static const std::vector<std::string> names = {"mlp", "cnn", "resnet", "vgg"};
  return names;
}

absl::StatusOr<LayerTable> ModelLayout(const std::string& model) {
  Shapes s;
  if (model == "mlp") {
    Linear(s, "fc1", 784, 256);
    Linear(s, "fc2", 256, 128);
    Linear(s, "fc3", 128, 10);
  } else if (model == "cnn") {
    Conv(s, "conv1", 1, 32, 3, true);
    Conv(s, "conv2", 32, 64, 3, true);
    Linear(s, "fc1", 64 * 7 * 7, 64);
    Linear(s, "fc2", 64, 10);
  } else if (model == "resnet") {
    s = ResNet();
  } else if (model == "vgg") {  // bench/e2e/workload_vgg.py's network, named as torch.nn.Sequential does
    Conv(s, "features.0", 1, 32, 3, true);
    Conv(s, "features.3", 32, 64, 3, true);
    Linear(s, "classifier.1", 64 * 7 * 7, 1536);
    Linear(s, "classifier.3", 1536, 512);
    Linear(s, "classifier.5", 512, 10);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("model: unknown model '", model, "' (valid: ", absl::StrJoin(BuiltinModels(), ", "), ")"));
  }
  return MakeLayerTable(s);
}

absl::StatusOr<LayerTable> CustomLayout(const YAML::Node& layers, const std::string& key) {
  if (!layers.IsSequence() || layers.size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": expected a non-empty list of [name, [dims...]]"));
  }
  Shapes s;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const YAML::Node entry = layers[i];
    const auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(key, "[", i, "]: ", why));
    };
    if (!entry.IsSequence() || entry.size() != 2 || !entry[0].IsScalar() || !entry[1].IsSequence()) {
      return bad("expected [name, [dims...]]");
    }
    std::vector<std::int64_t> dims;
    for (const auto& d : entry[1]) {
      std::int64_t v = 0;
      if (!d.IsScalar() || !YAML::convert<std::int64_t>::decode(d, v) || v < 1) {
        return bad(absl::StrCat("'", entry[0].Scalar(), "': dimensions must be integers >= 1"));
      }
      dims.push_back(v);
    }
    s.push_back({entry[0].Scalar(), dims});
  }
  LayerTable table = MakeLayerTable(s);
  if (auto st = ValidateLayerTable(table); !st.ok())
    return absl::InvalidArgumentError(absl::StrCat(key, ": ", st.message()));
  return table;
}

std::string LayoutText(const LayerTable& table) {
  std::vector<std::string> entries;
  for (const auto& l : table.layers) {
    entries.push_back(absl::StrCat("[\"", l.name, "\", [", absl::StrJoin(l.shape, ", "), "]]"));
  }
  return absl::StrCat("[", absl::StrJoin(entries, ", "), "]");
}

}  // namespace sketchps
