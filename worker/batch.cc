#include "worker/batch.h"

#include <ATen/ops/empty.h>

#include "common/status.h"

namespace sketchps::worker {

absl::StatusOr<Batch> MakeBatch(const Dataset& data, std::span<const std::uint64_t> indices) {
  const auto b = static_cast<std::int64_t>(indices.size());
  Batch batch{at::empty({b, 1, Dataset::kRows, Dataset::kCols}, at::kFloat), at::empty({b}, at::kLong)};
  SKETCHPS_RETURN_IF_ERROR(
      FillBatch(data, indices, batch.input.data_ptr<float>(), batch.target.data_ptr<std::int64_t>()));
  return batch;
}

}  // namespace sketchps::worker
