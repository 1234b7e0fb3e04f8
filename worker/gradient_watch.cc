#include "worker/gradient_watch.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include "absl/strings/str_cat.h"

namespace sketchps::worker {

struct GradientWatch::Hooks {
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
};

absl::StatusOr<std::unique_ptr<GradientWatch>> GradientWatch::Create(FlatModel& model, const ShardMap& shards) {
  std::unique_ptr<GradientWatch> watch(new GradientWatch());
  const auto& layers = model.layers().layers;
  const auto params = model.parameters();
  if (params.size() != layers.size()) {
    return absl::InternalError(
        absl::StrCat("GradientWatch: ", params.size(), " parameters for ", layers.size(), " layers"));
  }
  const auto n = static_cast<std::uint32_t>(shards.ranges.size());
  watch->params_of_shard_.assign(n, 0);
  watch->remaining_ = std::make_unique<std::atomic<std::uint32_t>[]>(n);
  watch->signalled_ = std::make_unique<std::atomic<bool>[]>(n);
  watch->seen_ = std::make_unique<std::atomic<bool>[]>(layers.size());
  watch->hooks_ = std::make_unique<Hooks>();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    std::vector<std::uint32_t> covered;
    for (std::uint32_t s = 0; s < n; ++s) {
      const auto& r = shards.ranges[s];
      if (layers[i].offset < r.hi && layers[i].offset + layers[i].numel > r.lo) covered.push_back(s);
    }
    for (auto s : covered) ++watch->params_of_shard_[s];
    watch->shards_of_param_.push_back(std::move(covered));
    auto accumulator = torch::autograd::impl::grad_accumulator(params[i]);
    if (accumulator == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("GradientWatch: parameter '", layers[i].name, "' has no gradient accumulator"));
    }
    GradientWatch* self = watch.get();
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [self, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          self->OnParameter(i);
          return outputs;
        }));
    watch->hooks_->accumulators.push_back(std::move(accumulator));
  }
  return watch;
}

GradientWatch::~GradientWatch() = default;

void GradientWatch::Arm(std::function<void(std::uint32_t)> ready) {
  ready_ = std::move(ready);
  for (std::size_t s = 0; s < params_of_shard_.size(); ++s) {
    remaining_[s].store(params_of_shard_[s]);
    signalled_[s].store(false);
  }
  for (std::size_t p = 0; p < shards_of_param_.size(); ++p) seen_[p].store(false);
  repeated_.store(false);
}

void GradientWatch::OnParameter(std::size_t param) {
  if (!ready_) return;  // not armed (e.g. a backward of the model outside the training loop)
  if (seen_[param].exchange(true)) {
    repeated_.store(true);
    return;
  }
  for (std::uint32_t s : shards_of_param_[param]) {
    if (remaining_[s].fetch_sub(1) == 1) Signal(s);
  }
}

void GradientWatch::Signal(std::uint32_t shard) {
  if (!signalled_[shard].exchange(true)) ready_(shard);
}

void GradientWatch::Finish() {
  for (std::uint32_t s = 0; s < params_of_shard_.size(); ++s) Signal(s);
  ready_ = nullptr;
}

}  // namespace sketchps::worker
