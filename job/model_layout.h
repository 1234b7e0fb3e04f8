// The parameter layout of the built-in models, known without libtorch, so that servers take the
// layer table from the job (a Join cannot define it) and size their limits before any worker
// connects. tests/worker/model_test.cc checks each table against the libtorch model it describes.
//
//   mlp     784-256-128-10                       235,146 parameters
//   cnn     conv 32, conv 64, fc 64, fc 10       220,234
//   resnet  GroupNorm ResNet, widths 32..256   1,228,394
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/layout.h"
#include "yaml-cpp/yaml.h"

namespace sketchps {

// "mlp", "cnn", "resnet", "vgg" (bench/e2e/workload_vgg.py's network).
const std::vector<std::string>& BuiltinModels();

// InvalidArgument "model: unknown model 'x' (valid: mlp, cnn, resnet, vgg)" for any other name.
absl::StatusOr<LayerTable> ModelLayout(const std::string& model);

// `model: custom` (a model of the user's own, trained from Python: docs/pytorch.md) takes its layout
// from the job's `layers` key: a list of [name, [dims...]] in flat order,
//   layers: [["fc1.weight", [256, 784]], ["fc1.bias", [256]]]
// InvalidArgument naming the entry ("layers[2]: ...") for anything else, and ValidateLayerTable's
// rules (unique names, positive sizes, d < 2^32). Without `layers` the job parses with an empty
// layout (a script describing its model reads it so); servers and workers then refuse it.
inline constexpr char kCustomModel[] = "custom";
absl::StatusOr<LayerTable> CustomLayout(const YAML::Node& layers, const std::string& key);

// The layout as one line of the `layers` syntax above (what CustomLayout reads back).
std::string LayoutText(const LayerTable& table);

}  // namespace sketchps
