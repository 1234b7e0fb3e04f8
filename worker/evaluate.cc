#include "worker/evaluate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/cross_entropy_loss.h>

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
  result.correct = correct;
  result.accuracy = static_cast<double>(correct) / static_cast<double>(result.count);
  result.mean_loss = loss_sum / static_cast<double>(result.count);
  return result;
}

absl::StatusOr<EvalResult> Evaluate(Model& model, const Dataset& data, std::uint64_t batch_size) {
  std::vector<std::uint64_t> all(data.size());
  std::iota(all.begin(), all.end(), std::uint64_t{0});
  return Evaluate(model, data, all, batch_size);
}

std::vector<float> EvalCounts::ToVector() const {
  const auto loss = static_cast<float>(loss_sum);
  const bool finite = std::isfinite(loss);
  return {static_cast<float>(correct), static_cast<float>(samples), finite ? loss : 0.0f, finite ? 0.0f : 1.0f};
}

EvalCounts EvalCounts::FromVector(const std::vector<float>& v) {
  const double loss = v[3] > 0 ? std::numeric_limits<double>::quiet_NaN() : v[2];
  return EvalCounts{v[0], v[1], loss};
}

absl::StatusOr<EvalCounts> EvaluateShare(Model& model, const Dataset& data, std::uint64_t samples, std::uint32_t rank,
                                         std::uint32_t workers, std::uint64_t batch_size) {
  const std::uint64_t n = samples == 0 ? data.size() : std::min<std::uint64_t>(samples, data.size());
  SKETCHPS_ASSIGN_OR_RETURN(std::vector<std::uint64_t> mine, Shard(n, rank, workers));
  if (mine.empty()) return EvalCounts{};
  SKETCHPS_ASSIGN_OR_RETURN(EvalResult r, Evaluate(model, data, mine, batch_size));
  const auto count = static_cast<double>(r.count);
  return EvalCounts{static_cast<double>(r.correct), count, r.mean_loss * count};
}

}  // namespace sketchps::worker
