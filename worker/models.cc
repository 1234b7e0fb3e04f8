#include "worker/models.h"

#include <cmath>
#include <utility>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "job/model_layout.h"
#include "worker/rng.h"

namespace sketchps::worker {
namespace {

namespace nn = torch::nn;
constexpr std::int64_t kClasses = 10;
constexpr std::int64_t kGroups = 8;  // GroupNorm groups in the ResNet

// Every model made here derives from NetBase, which is how Forward() finds the forward function.
class NetBase : public nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
};

class Mlp : public NetBase {
 public:
  Mlp()
      : fc1_(register_module("fc1", nn::Linear(784, 256))),
        fc2_(register_module("fc2", nn::Linear(256, 128))),
        fc3_(register_module("fc3", nn::Linear(128, kClasses))) {}

  at::Tensor forward(const at::Tensor& x) override {
    auto h = torch::relu(fc1_->forward(x.flatten(1)));
    h = torch::relu(fc2_->forward(h));
    return fc3_->forward(h);
  }

 private:
  nn::Linear fc1_, fc2_, fc3_;
};

class Cnn : public NetBase {
 public:
  Cnn()
      : conv1_(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)))),
        conv2_(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)))),
        fc1_(register_module("fc1", nn::Linear(64 * 7 * 7, 64))),
        fc2_(register_module("fc2", nn::Linear(64, kClasses))) {}

  at::Tensor forward(const at::Tensor& x) override {
    auto h = torch::max_pool2d(torch::relu(conv1_->forward(x)), 2);  // 32 x 14 x 14
    h = torch::max_pool2d(torch::relu(conv2_->forward(h)), 2);       // 64 x 7 x 7
    h = torch::relu(fc1_->forward(h.flatten(1)));
    return fc2_->forward(h);
  }

 private:
  nn::Conv2d conv1_, conv2_;
  nn::Linear fc1_, fc2_;
};

// The VGG-like network of bench/e2e/workload_vgg.py, with the same parameter names (a Sequential of
// features and one of the classifier, as torch.nn.Sequential numbers them), so that the C++ worker
// and the Python script train the same layout: two conv blocks, then 3136 -> 1536 -> 512 -> 10.
class Vgg : public NetBase {
 public:
  Vgg()
      : features_(register_module(
            "features",
            nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                           nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2)))),
        classifier_(register_module(
            "classifier", nn::Sequential(nn::Flatten(), nn::Linear(64 * 7 * 7, 1536), nn::ReLU(), nn::Linear(1536, 512),
                                         nn::ReLU(), nn::Linear(512, kClasses)))) {}

  at::Tensor forward(const at::Tensor& x) override { return classifier_->forward(features_->forward(x)); }

 private:
  nn::Sequential features_, classifier_;
};

nn::Conv2d Conv3x3(std::int64_t in, std::int64_t out, std::int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

// conv-GN-ReLU-conv-GN plus a (1x1 conv + GN when the shape changes) shortcut, then ReLU.
class BasicBlock : public nn::Module {
 public:
  BasicBlock(std::int64_t in, std::int64_t out, std::int64_t stride)
      : conv1_(register_module("conv1", Conv3x3(in, out, stride))),
        gn1_(register_module("gn1", nn::GroupNorm(kGroups, out))),
        conv2_(register_module("conv2", Conv3x3(out, out, 1))),
        gn2_(register_module("gn2", nn::GroupNorm(kGroups, out))) {
    if (stride != 1 || in != out) {
      down_conv_ = register_module("down_conv", nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
      down_gn_ = register_module("down_gn", nn::GroupNorm(kGroups, out));
    }
  }

  at::Tensor forward(const at::Tensor& x) {
    auto h = torch::relu(gn1_->forward(conv1_->forward(x)));
    h = gn2_->forward(conv2_->forward(h));
    const auto shortcut = down_conv_.is_empty() ? x : down_gn_->forward(down_conv_->forward(x));
    return torch::relu(h + shortcut);
  }

 private:
  nn::Conv2d conv1_;
  nn::GroupNorm gn1_;
  nn::Conv2d conv2_;
  nn::GroupNorm gn2_;
  nn::Conv2d down_conv_{nullptr};
  nn::GroupNorm down_gn_{nullptr};
};

class ResNet : public NetBase {
 public:
  ResNet()
      : stem_(register_module("stem", Conv3x3(1, 32, 1))),
        stem_gn_(register_module("stem_gn", nn::GroupNorm(kGroups, 32))),
        fc_(register_module("fc", nn::Linear(256, kClasses))) {
    const std::int64_t widths[] = {32, 64, 128, 256};
    std::int64_t in = 32;
    for (int i = 0; i < 4; ++i) {  // 28 -> 28 -> 14 -> 7 -> 4
      blocks_.push_back(
          register_module(absl::StrCat("block", i + 1), std::make_shared<BasicBlock>(in, widths[i], i == 0 ? 1 : 2)));
      in = widths[i];
    }
  }

  at::Tensor forward(const at::Tensor& x) override {
    auto h = torch::relu(stem_gn_->forward(stem_->forward(x)));
    for (const auto& block : blocks_) h = block->forward(h);
    return fc_->forward(h.mean({2, 3}));  // global average pooling
  }

 private:
  nn::Conv2d stem_;
  nn::GroupNorm stem_gn_;
  nn::Linear fc_;
  std::vector<std::shared_ptr<BasicBlock>> blocks_;
};

absl::Status FillUniform(at::Tensor& t, float bound, SplitMix64& rng) {
  if (!t.is_contiguous() || t.scalar_type() != at::kFloat) {
    return absl::InternalError("InitParameters: parameter is not a contiguous float32 tensor");
  }
  float* p = t.data_ptr<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = (2.0f * rng.Uniform01() - 1.0f) * bound;
  return absl::OkStatus();
}

// Re-initializes every parameter from `seed` alone (see the header for the scheme). Modules are
// visited in registration order, so the stream consumption is the same on every machine.
absl::Status InitParameters(nn::Module& root, std::uint64_t seed) {
  SplitMix64 rng(seed);
  torch::NoGradGuard no_grad;
  for (const auto& item : root.named_modules()) {
    auto own = item.value()->named_parameters(/*recurse=*/false);
    at::Tensor* weight = own.find("weight");
    at::Tensor* bias = own.find("bias");
    if (own.size() != (weight != nullptr ? 1u : 0u) + (bias != nullptr ? 1u : 0u)) {
      return absl::InternalError(
          absl::StrCat("InitParameters: module '", item.key(), "' has a parameter other than weight/bias"));
    }
    if (weight != nullptr && weight->dim() >= 2) {  // linear or convolution
      const auto fan_in = weight->numel() / weight->size(0);
      const auto bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
      SKETCHPS_RETURN_IF_ERROR(FillUniform(*weight, bound, rng));
      if (bias != nullptr) SKETCHPS_RETURN_IF_ERROR(FillUniform(*bias, bound, rng));
    } else {  // normalization: identity affine transform
      if (weight != nullptr) weight->fill_(1.0f);
      if (bias != nullptr) bias->zero_();
    }
  }
  return absl::OkStatus();
}

absl::Status CheckInput(const at::Tensor& x) {
  if (!x.defined()) return absl::InvalidArgumentError("model input is undefined");
  if (x.scalar_type() != at::kFloat) {
    return absl::InvalidArgumentError(
        absl::StrCat("model input has dtype ", std::string(c10::toString(x.scalar_type())), ", expected float32"));
  }
  if (x.dim() != 4 || x.size(0) < 1 || x.size(1) != 1 || x.size(2) != 28 || x.size(3) != 28) {
    return absl::InvalidArgumentError(
        absl::StrCat("model input has shape [", absl::StrJoin(x.sizes(), ","), "], expected [B,1,28,28]"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> ModelNames() { return BuiltinModels(); }

absl::StatusOr<std::shared_ptr<torch::nn::Module>> MakeModel(const std::string& name, std::uint64_t seed) {
  std::shared_ptr<NetBase> net;
  if (name == "mlp") {
    net = std::make_shared<Mlp>();
  } else if (name == "cnn") {
    net = std::make_shared<Cnn>();
  } else if (name == "resnet") {
    net = std::make_shared<ResNet>();
  } else if (name == "vgg") {
    net = std::make_shared<Vgg>();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown model '", name, "'; valid names: ", absl::StrJoin(ModelNames(), ", ")));
  }
  SKETCHPS_RETURN_IF_ERROR(InitParameters(*net, seed));
  return std::shared_ptr<torch::nn::Module>(std::move(net));
}

absl::StatusOr<at::Tensor> Forward(torch::nn::Module& module, const at::Tensor& input) {
  auto* net = dynamic_cast<NetBase*>(&module);
  if (net == nullptr) return absl::InvalidArgumentError("Forward: the module was not made by MakeModel");
  SKETCHPS_RETURN_IF_ERROR(CheckInput(input));
  try {
    return net->forward(input);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("Forward: libtorch error: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<at::Tensor> CrossEntropy(const at::Tensor& logits, const at::Tensor& target) {
  if (!logits.defined() || logits.dim() != 2 || logits.size(1) != kClasses) {
    return absl::InvalidArgumentError("CrossEntropy: logits must be [B,10]");
  }
  if (!target.defined() || target.scalar_type() != at::kLong || target.dim() != 1 || target.size(0) != logits.size(0)) {
    return absl::InvalidArgumentError(absl::StrCat("CrossEntropy: target must be int64 [", logits.size(0), "]"));
  }
  if (target.min().item<std::int64_t>() < 0 || target.max().item<std::int64_t>() >= kClasses) {
    return absl::InvalidArgumentError("CrossEntropy: target values must be in 0..9");
  }
  return torch::nn::functional::cross_entropy(logits, target);
}

Model::Model(std::string name, std::shared_ptr<torch::nn::Module> module, FlatModel flat)
    : name_(std::move(name)), module_(std::move(module)), flat_(std::move(flat)) {}

absl::StatusOr<Model> Model::Create(const std::string& name, std::uint64_t seed) {
  SKETCHPS_ASSIGN_OR_RETURN(auto module, MakeModel(name, seed));
  SKETCHPS_ASSIGN_OR_RETURN(auto flat, FlatModel::Create(module));
  return Model(name, std::move(module), std::move(flat));
}

absl::StatusOr<at::Tensor> Model::Forward(const at::Tensor& input) { return worker::Forward(*module_, input); }

absl::StatusOr<float> Model::ForwardBackward(const at::Tensor& input, const at::Tensor& target) {
  flat_.ZeroGrad();
  SKETCHPS_ASSIGN_OR_RETURN(auto logits, Forward(input));
  SKETCHPS_ASSIGN_OR_RETURN(auto loss, CrossEntropy(logits, target));
  try {
    loss.backward();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("ForwardBackward: libtorch error: ", e.what_without_backtrace()));
  }
  return loss.item<float>();
}

}  // namespace sketchps::worker
