// Test-set evaluation: accuracy and mean cross-entropy of a Model over (part of) a Dataset.
//
// Contract: runs under no-grad in batches of `batch_size` (the last batch may be smaller); the
// model's flat gradient buffer is untouched. Results do not depend on batch_size beyond float
// rounding. InvalidArgument when batch_size is 0, there are no samples, or an index is out of
// range; model errors are passed through.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <vector>

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

// Test-set evaluation on a thread of its own, on a copy of the weights, so that the rank that
// evaluates does not hold up the others' rounds (a peer waiting longer than peer.timeout_seconds
// would declare it dead). One evaluation at a time; `data` must outlive the object.
//
//   BackgroundEvaluation eval(model_name, seed, data);
//   eval.Start(weights, dim);              // copies the weights, returns at once
//   if (auto r = eval.Poll()) ...          // the result once it is there (then idle again)
//   auto r = eval.Wait();                  // blocks for the running evaluation
class BackgroundEvaluation {
 public:
  static absl::StatusOr<std::unique_ptr<BackgroundEvaluation>> Create(const std::string& model, std::uint64_t seed,
                                                                      const Dataset& data);
  ~BackgroundEvaluation();

  // FailedPrecondition while one is running; InvalidArgument when dim differs from the model's.
  absl::Status Start(const float* weights, std::uint64_t dim);
  bool running() const { return pending_.valid(); }
  // The finished evaluation's result, or nullopt while it runs (or when none was started).
  std::optional<absl::StatusOr<EvalResult>> Poll();
  // Blocks until the running evaluation ends; FailedPrecondition when none runs.
  absl::StatusOr<EvalResult> Wait();

 private:
  BackgroundEvaluation(std::unique_ptr<Model> model, const Dataset& data) : model_(std::move(model)), data_(data) {}
  std::unique_ptr<Model> model_;
  const Dataset& data_;
  std::future<absl::StatusOr<EvalResult>> pending_;
};

}  // namespace sketchps::worker
