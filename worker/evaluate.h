// Test-set evaluation: accuracy and mean cross-entropy of a Model over (part of) a Dataset.
//
// Contract: runs under no-grad in batches of `batch_size` (the last batch may be smaller); the
// model's flat gradient buffer is untouched. Results do not depend on batch_size beyond float
// rounding. InvalidArgument when batch_size is 0, there are no samples, or an index is out of
// range; model errors are passed through.
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "worker/fashion_mnist.h"
#include "worker/models.h"

namespace sketchps::worker {

struct EvalResult {
  std::uint64_t count = 0;   // samples evaluated
  double accuracy = 0.0;     // fraction of argmax(logits) == label, in [0, 1]
  double mean_loss = 0.0;    // mean cross-entropy (natural log)
};

// Evaluates the samples `indices` of `data`.
absl::StatusOr<EvalResult> Evaluate(Model& model, const Dataset& data, std::span<const std::uint64_t> indices,
                                    std::uint64_t batch_size = 1000);

// Evaluates every sample of `data`.
absl::StatusOr<EvalResult> Evaluate(Model& model, const Dataset& data, std::uint64_t batch_size = 1000);

}  // namespace sketchps::worker
