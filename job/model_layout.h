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

namespace sketchps {

// "mlp", "cnn", "resnet".
const std::vector<std::string>& BuiltinModels();

// InvalidArgument "model: unknown model 'x' (valid: mlp, cnn, resnet)" for any other name.
absl::StatusOr<LayerTable> ModelLayout(const std::string& model);

}  // namespace sketchps
