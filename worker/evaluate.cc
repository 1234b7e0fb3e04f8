#include "worker/evaluate.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/cross_entropy_loss.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sketchps::worker {

absl::StatusOr<EvalResult> Evaluate(Model& model, const Dataset& data, std::span<const std::uint64_t> indices,
                                    std::uint64_t batch_size) {
  if (batch_size == 0) return absl::InvalidArgumentError("Evaluate: batch_size is 0");
  if (indices.empty()) return absl::InvalidArgumentError("Evaluate: no samples");
  at::NoGradGuard no_grad;
  double loss_sum = 0.0;
  std::uint64_t correct = 0;
  for (std::uint64_t lo = 0; lo < indices.size(); lo += batch_size) {
    const auto part = indices.subspan(lo, std::min<std::uint64_t>(batch_size, indices.size() - lo));
    SKETCHPS_ASSIGN_OR_RETURN(auto batch, MakeBatch(data, part));
    SKETCHPS_ASSIGN_OR_RETURN(auto logits, model.Forward(batch.input));
    loss_sum += at::cross_entropy_loss(logits, batch.target, {}, at::Reduction::Sum).item<double>();
    correct += static_cast<std::uint64_t>(logits.argmax(1).eq(batch.target).sum().item<std::int64_t>());
  }
  EvalResult result;
  result.count = indices.size();
  result.accuracy = static_cast<double>(correct) / static_cast<double>(result.count);
  result.mean_loss = loss_sum / static_cast<double>(result.count);
  return result;
}

absl::StatusOr<EvalResult> Evaluate(Model& model, const Dataset& data, std::uint64_t batch_size) {
  std::vector<std::uint64_t> all(data.size());
  std::iota(all.begin(), all.end(), std::uint64_t{0});
  return Evaluate(model, data, all, batch_size);
}

absl::StatusOr<std::unique_ptr<BackgroundEvaluation>> BackgroundEvaluation::Create(const std::string& model,
                                                                                   std::uint64_t seed, const Dataset& data) {
  SKETCHPS_ASSIGN_OR_RETURN(Model m, Model::Create(model, seed));
  return std::unique_ptr<BackgroundEvaluation>(new BackgroundEvaluation(std::make_unique<Model>(std::move(m)), data));
}

BackgroundEvaluation::~BackgroundEvaluation() {
  if (pending_.valid()) pending_.wait();
}

absl::Status BackgroundEvaluation::Start(const float* weights, std::uint64_t dim) {
  if (pending_.valid()) return absl::FailedPreconditionError("BackgroundEvaluation: an evaluation is still running");
  if (dim != model_->flat().dim()) {
    return absl::InvalidArgumentError(absl::StrCat("BackgroundEvaluation: ", dim, " weights for a model of ", model_->flat().dim()));
  }
  std::memcpy(model_->flat().params(), weights, dim * sizeof(float));
  pending_ = std::async(std::launch::async, [this] { return Evaluate(*model_, data_); });
  return absl::OkStatus();
}

std::optional<absl::StatusOr<EvalResult>> BackgroundEvaluation::Poll() {
  if (!pending_.valid() || pending_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return std::nullopt;
  return pending_.get();
}

absl::StatusOr<EvalResult> BackgroundEvaluation::Wait() {
  if (!pending_.valid()) return absl::FailedPreconditionError("BackgroundEvaluation: nothing is running");
  return pending_.get();
}

}  // namespace sketchps::worker
