#include "worker/flat_model.h"

#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "kernels/backend.h"

namespace sketchps::worker {

struct FlatModel::State {
  std::shared_ptr<torch::nn::Module> module;  // null for FromParameters
  std::vector<std::pair<std::string, at::Tensor>> params;
  at::Tensor flat_params;
  at::Tensor flat_grads;
  sketchps::LayerTable layers;
  // The flat buffers are host memory, which the CPU kernels take: registered for the kernels'
  // device memory checks (kernels/backend.h).
  kernels::DeviceMemoryRegistration params_memory, grads_memory;
};

namespace {

std::string ShapeString(at::IntArrayRef sizes) { return absl::StrCat("[", absl::StrJoin(sizes, ","), "]"); }

absl::Status CheckParameter(const std::string& name, const at::Tensor& p) {
  const auto fail = [&name](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("FlatModel: parameter '", name, "' ", why));
  };
  if (!p.defined()) return fail("is undefined");
  if (p.layout() != at::kStrided || !p.device().is_cpu()) return fail("is not a dense CPU tensor");
  if (p.scalar_type() != at::kFloat)
    return fail(absl::StrCat("has dtype ", std::string(c10::toString(p.scalar_type())), ", expected float32"));
  if (!p.requires_grad()) return fail("has requires_grad == false (frozen parameters are not supported)");
  if (p.numel() == 0) return fail("is empty");
  return absl::OkStatus();
}

using Named = std::vector<std::pair<std::string, at::Tensor>>;

absl::Status CheckBuffers(const std::vector<std::string>& buffers) {
  if (buffers.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("FlatModel: module has buffer '", buffers.front(),
                                                 "' (state outside the flat vector, e.g. BatchNorm running "
                                                 "statistics); use GroupNorm/LayerNorm or no normalization"));
}

// The module-level rules over parameters in flat order: each checked, none registered twice.
absl::Status CheckParameters(const Named& params) {
  std::unordered_set<const void*> seen;
  for (const auto& [name, p] : params) {
    SKETCHPS_RETURN_IF_ERROR(CheckParameter(name, p));
    if (!seen.insert(p.unsafeGetTensorImpl()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("FlatModel: parameter '", name, "' is registered twice (shared weights are not supported)"));
    }
  }
  if (params.empty()) return absl::InvalidArgumentError("FlatModel: module has no parameters");
  return absl::OkStatus();
}

Named ModuleParameters(const torch::nn::Module& module) {
  Named out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}

}  // namespace

absl::StatusOr<FlatModel> FlatModel::Create(std::shared_ptr<torch::nn::Module> module) {
  if (module == nullptr) return absl::InvalidArgumentError("FlatModel: module is null");
  std::vector<std::string> buffers;
  for (const auto& b : module->named_buffers(/*recurse=*/true)) buffers.push_back(b.key());
  SKETCHPS_ASSIGN_OR_RETURN(FlatModel flat, FromParameters(ModuleParameters(*module), buffers));
  flat.state_->module = std::move(module);
  return flat;
}

absl::StatusOr<FlatModel> FlatModel::FromParameters(std::vector<std::pair<std::string, at::Tensor>> params,
                                                    const std::vector<std::string>& buffers) {
  SKETCHPS_RETURN_IF_ERROR(CheckBuffers(buffers));
  SKETCHPS_RETURN_IF_ERROR(CheckParameters(params));
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes;
  for (const auto& [name, p] : params) shapes.emplace_back(name, p.sizes().vec());
  auto state = std::make_unique<State>();
  state->layers = sketchps::MakeLayerTable(shapes);
  SKETCHPS_RETURN_IF_ERROR(sketchps::ValidateLayerTable(state->layers));
  const auto d = static_cast<std::int64_t>(state->layers.dim());
  state->flat_params = torch::empty({d}, torch::kFloat);
  state->flat_grads = torch::zeros({d}, torch::kFloat);
  const auto bytes = static_cast<std::size_t>(d) * sizeof(float);
  state->params_memory = kernels::DeviceMemoryRegistration(state->flat_params.data_ptr<float>(), bytes);
  state->grads_memory = kernels::DeviceMemoryRegistration(state->flat_grads.data_ptr<float>(), bytes);

  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params.size(); ++i) {
    at::Tensor& p = params[i].second;
    const auto& layer = state->layers.layers[i];
    const auto off = static_cast<std::int64_t>(layer.offset);
    const auto n = static_cast<std::int64_t>(layer.numel);
    at::Tensor slice = state->flat_params.narrow(0, off, n).view(p.sizes());
    slice.copy_(p.detach());
    p.set_data(slice);  // the registered parameter now aliases the flat buffer
    p.mutable_grad() = state->flat_grads.narrow(0, off, n).view(p.sizes());
  }
  state->params = std::move(params);
  return FlatModel(std::move(state));
}

FlatModel::FlatModel(std::unique_ptr<State> state)
    : state_(std::move(state)),
      params_(state_->flat_params.data_ptr<float>()),
      grads_(state_->flat_grads.data_ptr<float>()),
      dim_(state_->layers.dim()) {}

FlatModel::FlatModel(FlatModel&&) noexcept = default;
FlatModel& FlatModel::operator=(FlatModel&&) noexcept = default;
FlatModel::~FlatModel() = default;

const sketchps::LayerTable& FlatModel::layers() const { return state_->layers; }

std::vector<at::Tensor> FlatModel::parameters() const {
  std::vector<at::Tensor> out;
  for (const auto& [name, p] : state_->params) out.push_back(p);
  return out;
}

void FlatModel::ZeroGrad() { state_->flat_grads.zero_(); }

absl::Status FlatModel::VerifyViews() const {
  const Named items = state_->module ? ModuleParameters(*state_->module) : state_->params;
  const auto& layers = state_->layers.layers;
  if (items.size() != layers.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("FlatModel: module now has ", items.size(), " parameters, the layer table ", layers.size()));
  }
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto& p = items[i].second;
    const auto& layer = layers[i];
    const auto fail = [&](const std::string& why) {
      return absl::FailedPreconditionError(absl::StrCat("FlatModel: parameter '", layer.name, "' ", why));
    };
    if (items[i].first != layer.name) return fail(absl::StrCat("is now named '", items[i].first, "'"));
    if (p.sizes().vec() != layer.shape) return fail(absl::StrCat("has shape ", ShapeString(p.sizes())));
    if (!p.is_contiguous() || p.data_ptr() != params_ + layer.offset) return fail("no longer aliases params()");
    const at::Tensor& g = p.grad();
    if (!g.defined()) return fail(".grad is undefined (was it set to None by zero_grad(true)?)");
    if (!g.is_contiguous() || g.data_ptr() != grads_ + layer.offset || g.sizes() != p.sizes()) {
      return fail(".grad no longer aliases grads()");
    }
  }
  return absl::OkStatus();
}

at::Tensor FlatModel::params_tensor() const { return state_->flat_params; }
at::Tensor FlatModel::grads_tensor() const { return state_->flat_grads; }
torch::nn::Module& FlatModel::module() const { return *state_->module; }
bool FlatModel::has_module() const { return state_->module != nullptr; }

}  // namespace sketchps::worker
