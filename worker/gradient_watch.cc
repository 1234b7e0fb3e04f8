#include "worker/gradient_watch.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"

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
  SKETCHPS_ASSIGN_OR_RETURN(watch->readiness_, session::ShardReadiness::Create(model.layers(), shards));
  watch->hooks_ = std::make_unique<Hooks>();
  session::ShardReadiness* readiness = watch->readiness_.get();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params[i]);
    if (accumulator == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("GradientWatch: parameter '", layers[i].name, "' has no gradient accumulator"));
    }
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [readiness, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          readiness->MarkComplete(i);
          return outputs;
        }));
    watch->hooks_->accumulators.push_back(std::move(accumulator));
  }
  return watch;
}

GradientWatch::~GradientWatch() = default;

}  // namespace sketchps::worker
