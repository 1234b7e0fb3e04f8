// Fashion-MNIST batches as libtorch tensors (the samples and normalization of worker/fashion_mnist.h).
#pragma once

#include <cstdint>
#include <span>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "worker/fashion_mnist.h"

namespace sketchps::worker {

struct Batch {
  at::Tensor input;   // float32 [B, 1, 28, 28], normalized
  at::Tensor target;  // int64 [B], labels
};

// The samples `indices` as tensors (FillBatch). InvalidArgument when indices is empty or an index >= size().
absl::StatusOr<Batch> MakeBatch(const Dataset& data, std::span<const std::uint64_t> indices);

}  // namespace sketchps::worker
