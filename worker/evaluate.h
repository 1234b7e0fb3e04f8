// Test-set evaluation: accuracy and mean cross-entropy of a Model over (part of) a Dataset, and one
// rank's share of a sharded evaluation.
//
// Contract: runs under no-grad in batches of `batch_size` (the last batch may be smaller); the
// model's flat gradient buffer is untouched. Results do not depend on batch_size beyond float
// rounding. InvalidArgument when batch_size is 0, there are no samples, or an index is out of
// range; model errors are passed through.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/batch.h"
#include "worker/models.h"

namespace sketchps::worker {

struct EvalResult {
  std::uint64_t count = 0;    // samples evaluated
  std::uint64_t correct = 0;  // argmax(logits) == label
  double accuracy = 0.0;      // fraction of argmax(logits) == label, in [0, 1]
  double mean_loss = 0.0;     // mean cross-entropy (natural log)
};

// Evaluates the samples `indices` of `data`.
absl::StatusOr<EvalResult> Evaluate(Model& model, const Dataset& data, std::span<const std::uint64_t> indices,
                                    std::uint64_t batch_size = 1000);

// Evaluates every sample of `data`.
absl::StatusOr<EvalResult> Evaluate(Model& model, const Dataset& data, std::uint64_t batch_size = 1000);

// Sums over one rank's share of an evaluation, to be added over the workers (SumOverWorkers):
// accuracy = correct / samples, mean loss = loss_sum / samples (NaN once any rank's loss was not
// finite: a diverged model still reports its accuracy).
struct EvalCounts {
  double correct = 0;
  double samples = 0;
  double loss_sum = 0;
  // {correct, samples, loss_sum, 0}, or {correct, samples, 0, 1} when loss_sum is not finite: the
  // servers refuse non-finite values, so the fourth entry counts the ranks whose loss was.
  std::vector<float> ToVector() const;
  static EvalCounts FromVector(const std::vector<float>& v);  // v.size() == 4
};

// Evaluates this rank's contiguous block (Shard(n, rank, workers)) of the first n = `samples` images
// of `data` (0 or more than data.size(): all of them). A rank whose block is empty returns zeros.
absl::StatusOr<EvalCounts> EvaluateShare(Model& model, const Dataset& data, std::uint64_t samples, std::uint32_t rank,
                                         std::uint32_t workers, std::uint64_t batch_size = 200);

}  // namespace sketchps::worker
