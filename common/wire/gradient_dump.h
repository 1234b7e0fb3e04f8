// Gradient dumps: one worker's flat gradient of one round with the model's layout, as a framed
// sketchps.v1.GradientDump file (common/wire/gradient_dump.cc; the same magic + length + CRC32 framing as
// shard checkpoints), so that selection density and sketch recall can be measured on real gradients
// (`sketchps bench --input`).
//
// ReadGradientDump treats the file as hostile: it checks the framing, the layout (ValidateLayerTable)
// and that the values cover it exactly before returning; errors name the file and the problem.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/layout.h"

namespace sketchps {

inline constexpr char kGradientDumpMagic[8] = {'S', 'K', 'P', 'S', 'G', 'R', 'D', '1'};

struct GradientDump {
  std::string job_id;
  std::string model;
  std::uint32_t worker_id = 0;
  std::uint32_t num_workers = 1;
  std::uint64_t round = 0;
  LayerTable layers;
  std::vector<float> values;  // layers.dim() values
};

// Writes `dump` (values.size() must equal layers.dim()) atomically to `path`.
absl::Status WriteGradientDump(const std::string& path, const GradientDump& dump);
absl::StatusOr<GradientDump> ReadGradientDump(const std::string& path);
// The same checks on a file's bytes in memory (`name` stands for the path in errors).
absl::StatusOr<GradientDump> ParseGradientDumpBytes(std::string bytes, const std::string& name);
// The file name a worker uses: "grad-r<round, 8 digits>-w<worker>.skgd".
std::string GradientDumpName(std::uint64_t round, std::uint32_t worker);

}  // namespace sketchps
