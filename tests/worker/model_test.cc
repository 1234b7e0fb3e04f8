// FlatModel views, model construction and determinism, gradient equivalence of the data order rule,
// and a short SGD run on real Fashion-MNIST written through params().
#include <torch/torch.h>
// After libtorch's headers, so that Catch's CHECK replaces glog's.
#undef CHECK
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <vector>

#include <catch2/catch.hpp>

#include "common/wire/layout_proto.h"
#include "job/model_layout.h"
#include "worker/batch.h"
#include "worker/evaluate.h"
#include "worker/flat_model.h"
#include "worker/models.h"

using namespace sketchps::worker;

namespace {

const Dataset& TrainSet() {
  static const Dataset data = [] {
    auto loaded = LoadFashionMnist(kDefaultFashionMnistDir, Split::kTrain);
    if (!loaded.ok()) FAIL("the Fashion-MNIST package is required (scripts/setup.sh): " << loaded.status().ToString());
    return *std::move(loaded);
  }();
  return data;
}

Batch FirstSamples(std::uint64_t n) {
  std::vector<std::uint64_t> idx(n);
  std::iota(idx.begin(), idx.end(), std::uint64_t{0});
  auto batch = MakeBatch(TrainSet(), idx);
  REQUIRE(batch.ok());
  return *std::move(batch);
}

Model MustCreate(const std::string& name, std::uint64_t seed) {
  auto model = Model::Create(name, seed);
  REQUIRE(model.ok());
  return *std::move(model);
}

at::Tensor MustForward(Model& model, const at::Tensor& x) {
  auto out = model.Forward(x);
  REQUIRE(out.ok());
  return *out;
}

std::vector<float> Copy(const float* p, std::uint64_t n) { return std::vector<float>(p, p + n); }

}  // namespace

TEST_CASE("FlatModel: layer table equals named_parameters and parameters alias params()", "[worker][flat]") {
  Model model = MustCreate("cnn", 1);
  FlatModel& flat = model.flat();
  const auto named = model.module().named_parameters();
  REQUIRE(flat.layers().layers.size() == named.size());
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < named.size(); ++i) {
    const auto& layer = flat.layers().layers[i];
    const auto& p = named[i].value();
    CHECK(layer.name == named[i].key());
    CHECK(layer.offset == offset);
    CHECK(layer.numel == static_cast<std::uint64_t>(p.numel()));
    CHECK(layer.shape == p.sizes().vec());
    CHECK(p.requires_grad());
    CHECK(p.data_ptr() == static_cast<void*>(flat.params() + layer.offset));
    CHECK(p.grad().data_ptr() == static_cast<void*>(flat.grads() + layer.offset));
    offset += layer.numel;
  }
  CHECK(flat.dim() == offset);
  CHECK(flat.layers().layers[0].name == "conv1.weight");
  CHECK(flat.VerifyViews().ok());
  CHECK(flat.params_tensor().numel() == static_cast<std::int64_t>(flat.dim()));
}

TEST_CASE("FlatModel: writes through params() change the forward output", "[worker][flat]") {
  Model model = MustCreate("cnn", 2);
  const at::Tensor x = FirstSamples(4).input;
  const at::Tensor before = MustForward(model, x).detach().clone();
  const auto& last_bias = model.flat().layers().layers.back();
  REQUIRE(last_bias.name == "fc2.bias");
  model.flat().params()[last_bias.offset + 3] += 1.5f;  // logit 3 of every sample moves by exactly 1.5
  const at::Tensor after = MustForward(model, x).detach();
  const at::Tensor diff = after - before;
  CHECK(diff.select(1, 3).allclose(torch::full({4}, 1.5f), 1e-5, 1e-5));
  CHECK(diff.index_select(1, torch::tensor({0, 1, 2, 4, 9})).abs().max().item<float>() == 0.0f);
  SECTION("zero weights give zero logits") {
    std::memset(model.flat().params(), 0, model.flat().dim() * sizeof(float));
    CHECK(MustForward(model, x).abs().max().item<float>() == 0.0f);
  }
}

TEST_CASE("FlatModel: backward fills grads(), accumulates, and ZeroGrad keeps the views", "[worker][flat]") {
  Model model = MustCreate("mlp", 3);
  FlatModel& flat = model.flat();
  const Batch batch = FirstSamples(16);
  // Reference gradient computed by autograd without touching any .grad.
  std::vector<at::Tensor> params;
  for (const auto& item : model.module().named_parameters()) params.push_back(item.value());
  auto loss = CrossEntropy(*model.Forward(batch.input), batch.target);
  REQUIRE(loss.ok());
  const auto ref = torch::autograd::grad({*loss}, params);
  CHECK(flat.grads_tensor().abs().max().item<float>() == 0.0f);  // zero until the first backward

  REQUIRE(model.ForwardBackward(batch.input, batch.target).ok());
  const std::vector<float> g1 = Copy(flat.grads(), flat.dim());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& layer = flat.layers().layers[i];
    const at::Tensor slice = flat.grads_tensor().narrow(0, layer.offset, layer.numel).view(params[i].sizes());
    CHECK(slice.allclose(ref[i], 1e-5, 1e-6));
    CHECK(params[i].grad().equal(slice));
  }
  CHECK(flat.grads_tensor().abs().sum().item<float>() > 0.0f);

  SECTION("a second backward without ZeroGrad accumulates in place") {
    (*CrossEntropy(*model.Forward(batch.input), batch.target)).backward();
    for (std::uint64_t i = 0; i < flat.dim(); i += 997) CHECK(flat.grads()[i] == Approx(2 * g1[i]).margin(1e-7));
    CHECK(flat.VerifyViews().ok());
  }
  SECTION("ZeroGrad zeroes, and the next backward fills the same buffer") {
    flat.ZeroGrad();
    CHECK(flat.grads_tensor().abs().max().item<float>() == 0.0f);
    CHECK(flat.VerifyViews().ok());
    REQUIRE(model.ForwardBackward(batch.input, batch.target).ok());
    CHECK(Copy(flat.grads(), flat.dim()) == g1);
  }
  SECTION("zero_grad(set_to_none) detaches .grad and VerifyViews reports it") {
    model.module().zero_grad(/*set_to_none=*/true);
    const auto st = flat.VerifyViews();
    CHECK(st.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(st.message()), Catch::Contains("'fc1.weight'") && Catch::Contains(".grad is undefined"));
  }
}

TEST_CASE("FlatModel rejects modules it cannot flatten", "[worker][flat]") {
  const auto message = [](std::shared_ptr<torch::nn::Module> m) {
    auto flat = FlatModel::Create(std::move(m));
    REQUIRE(!flat.ok());
    CHECK(flat.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(flat.status().message());
  };
  CHECK_THAT(message(torch::nn::BatchNorm2d(4).ptr()), Catch::Contains("buffer 'running_mean'"));
  CHECK_THAT(message(std::make_shared<torch::nn::Module>()), Catch::Contains("no parameters"));
  auto frozen = torch::nn::Linear(3, 2);
  frozen->bias.set_requires_grad(false);
  CHECK_THAT(message(frozen.ptr()), Catch::Contains("'bias'") && Catch::Contains("requires_grad"));
  auto dbl = torch::nn::Linear(3, 2);
  dbl->to(torch::kDouble);
  CHECK_THAT(message(dbl.ptr()), Catch::Contains("'weight'") && Catch::Contains("float32"));
  auto shared = std::make_shared<torch::nn::Module>();
  auto w = shared->register_parameter("a", torch::ones({2}));
  shared->register_parameter("b", w);
  CHECK_THAT(message(shared), Catch::Contains("'b' is registered twice"));
}

TEST_CASE("MakeModel: same seed gives bitwise identical weights, another seed different ones", "[worker][models]") {
  for (const auto& name : ModelNames()) {
    INFO(name);
    torch::manual_seed(11);  // libtorch's global RNG must not matter
    Model a = MustCreate(name, 42);
    torch::manual_seed(12345);
    Model b = MustCreate(name, 42);
    Model c = MustCreate(name, 43);
    REQUIRE(a.flat().dim() == b.flat().dim());
    CHECK(std::memcmp(a.flat().params(), b.flat().params(), a.flat().dim() * sizeof(float)) == 0);
    CHECK(std::memcmp(a.flat().params(), c.flat().params(), a.flat().dim() * sizeof(float)) != 0);
    const at::Tensor p = a.flat().params_tensor();
    CHECK(p.isfinite().all().item<bool>());
    CHECK(p.abs().max().item<float>() <= 1.0f);  // U(+-1/sqrt(fan_in)) and GroupNorm 1/0
  }
}

TEST_CASE("MakeModel: names, parameter counts and output shapes", "[worker][models]") {
  const at::Tensor x = FirstSamples(3).input;
  const std::map<std::string, std::uint64_t> expected = {{"mlp", 235146}, {"cnn", 220234}};
  for (const auto& name : ModelNames()) {
    Model model = MustCreate(name, 1);
    const std::uint64_t d = model.flat().dim();
    WARN(name << ": " << d << " parameters, " << model.flat().layers().layers.size() << " tensors");
    if (expected.count(name)) CHECK(d == expected.at(name));
    const at::Tensor out = MustForward(model, x);
    CHECK(out.sizes().vec() == std::vector<std::int64_t>{3, 10});
    CHECK(model.module().named_buffers().size() == 0);
  }
  CHECK(MustCreate("resnet", 1).flat().dim() >= 1'000'000);
  // The layouts the servers know without libtorch (job/model_layout.h) are exactly the models'.
  for (const auto& name : ModelNames()) {
    const auto layout = sketchps::ModelLayout(name);
    REQUIRE(layout.ok());
    CHECK(sketchps::SameLayers(*layout, MustCreate(name, 1).flat().layers()));
  }

  const auto unknown = MakeModel("alexnet", 1);
  CHECK(unknown.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(unknown.status().message()),
             Catch::Contains("'alexnet'") && Catch::Contains("mlp, cnn, resnet, vgg"));

  Model mlp = MustCreate("mlp", 1);
  const auto bad_shape = mlp.Forward(torch::zeros({2, 784}));
  CHECK(bad_shape.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad_shape.status().message()), Catch::Contains("[2,784]"));
  CHECK(!mlp.Forward(torch::zeros({2, 1, 28, 28}, torch::kDouble)).ok());
  CHECK(!Forward(*torch::nn::Linear(784, 10).ptr(), x).ok());
  CHECK(!mlp.ForwardBackward(x, torch::tensor({0, 1, 10}, torch::kLong)).ok());  // label out of range
}

TEST_CASE("Data order rule: P workers with batch b average to one process with batch P*b", "[worker][models]") {
  const auto perm = EpochPermutation(TrainSet().size(), 5, 0);
  constexpr std::uint64_t b = 8;
  for (const std::uint32_t world : {2u, 3u}) {
    INFO("world " << world);
    Model model = MustCreate("mlp", 9);
    const std::uint64_t d = model.flat().dim();
    std::vector<double> mean(d, 0.0);
    for (std::uint32_t w = 0; w < world; ++w) {
      const auto idx = StepIndices(perm, 1, w, world, b);
      REQUIRE(idx.ok());
      const auto batch = MakeBatch(TrainSet(), *idx);
      REQUIRE(model.ForwardBackward(batch->input, batch->target).ok());
      for (std::uint64_t i = 0; i < d; ++i) mean[i] += model.flat().grads()[i] / world;
    }
    const auto idx = StepIndices(perm, 1, 0, 1, world * b);
    const auto batch = MakeBatch(TrainSet(), *idx);
    REQUIRE(model.ForwardBackward(batch->input, batch->target).ok());
    double max_err = 0.0;
    for (std::uint64_t i = 0; i < d; ++i) max_err = std::max(max_err, std::abs(mean[i] - model.flat().grads()[i]));
    CHECK(max_err < 1e-6);
    CHECK(model.flat().grads_tensor().abs().max().item<float>() > 1e-3f);
  }
}

TEST_CASE("SGD written through params() lowers the CNN's training loss", "[worker][train][long]") {
  const Dataset& train = TrainSet();
  Model model = MustCreate("cnn", 7);
  std::vector<std::uint64_t> probe(2000);
  std::iota(probe.begin(), probe.end(), std::uint64_t{0});
  const auto before = Evaluate(model, train, probe, 500);
  REQUIRE(before.ok());

  constexpr std::uint64_t kBatch = 64, kSteps = 60;
  constexpr float kLr = 0.1f;
  const auto perm = EpochPermutation(train.size(), 1, 0);
  for (std::uint64_t step = 0; step < kSteps; ++step) {
    const auto idx = StepIndices(perm, step, 0, 1, kBatch);
    const auto batch = MakeBatch(train, *idx);
    REQUIRE(model.ForwardBackward(batch->input, batch->target).ok());
    float* w = model.flat().params();
    const float* g = model.flat().grads();
    for (std::uint64_t i = 0; i < model.flat().dim(); ++i) w[i] -= kLr * g[i];
  }
  const auto after = Evaluate(model, train, probe, 500);
  REQUIRE(after.ok());
  WARN("cnn probe loss " << before->mean_loss << " -> " << after->mean_loss << ", accuracy " << before->accuracy
                         << " -> " << after->accuracy << " after " << kSteps << " steps of " << kBatch);
  CHECK(before->mean_loss > 2.0);  // ~ln(10) at initialization
  CHECK(after->mean_loss < 0.6 * before->mean_loss);
  CHECK(after->accuracy > 0.55);
  CHECK(model.flat().VerifyViews().ok());
}

TEST_CASE("Evaluate: batching does not change the result, bad arguments are rejected", "[worker][evaluate]") {
  Model model = MustCreate("mlp", 4);
  std::vector<std::uint64_t> idx(300);
  std::iota(idx.begin(), idx.end(), std::uint64_t{100});
  const auto big = Evaluate(model, TrainSet(), idx, 1000);
  const auto small = Evaluate(model, TrainSet(), idx, 7);
  REQUIRE(big.ok());
  REQUIRE(small.ok());
  CHECK(big->count == 300);
  CHECK(big->accuracy == small->accuracy);
  CHECK(big->mean_loss == Approx(small->mean_loss).epsilon(1e-5));
  CHECK(model.flat().grads_tensor().abs().max().item<float>() == 0.0f);  // no grad recorded
  CHECK(!Evaluate(model, TrainSet(), idx, 0).ok());
  CHECK(!Evaluate(model, TrainSet(), std::span<const std::uint64_t>{}, 10).ok());
  const std::vector<std::uint64_t> out_of_range = {0, TrainSet().size()};
  CHECK_THAT(std::string(Evaluate(model, TrainSet(), out_of_range, 10).status().message()),
             Catch::Contains("indices[1] = 60000"));
}

// Hidden (not run by ctest, ~4 min on 2 cores): ./sketchps_worker_tests "[slow]".
TEST_CASE("The CNN reaches ~89% Fashion-MNIST test accuracy in 3 epochs of plain SGD", "[.][slow]") {
  const auto test = LoadFashionMnist(kDefaultFashionMnistDir, Split::kTest);
  REQUIRE(test.ok());
  Model model = MustCreate("cnn", 7);
  constexpr std::uint64_t kBatch = 64, kEpochs = 3;
  constexpr float kLr = 0.05f;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t epoch = 0; epoch < kEpochs; ++epoch) {
    const auto perm = EpochPermutation(TrainSet().size(), 1, epoch);
    for (std::uint64_t step = 0; step < StepsPerEpoch(perm.size(), 1, kBatch); ++step) {
      const auto batch = MakeBatch(TrainSet(), *StepIndices(perm, step, 0, 1, kBatch));
      REQUIRE(model.ForwardBackward(batch->input, batch->target).ok());
      float* w = model.flat().params();
      const float* g = model.flat().grads();
      for (std::uint64_t i = 0; i < model.flat().dim(); ++i) w[i] -= kLr * g[i];
    }
    const auto result = Evaluate(model, *test);
    REQUIRE(result.ok());
    WARN("epoch " << epoch + 1 << ": test accuracy " << result->accuracy << ", loss " << result->mean_loss << ", "
                  << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s");
    if (epoch + 1 == kEpochs) CHECK(result->accuracy > 0.87);
  }
}

TEST_CASE("EvalCounts travel as finite numbers, a diverged rank's loss comes back as NaN", "[worker][evaluate]") {
  using sketchps::worker::EvalCounts;
  const EvalCounts fine{7, 10, 4.5};
  const auto v = fine.ToVector();
  CHECK(v == std::vector<float>{7, 10, 4.5f, 0});
  const EvalCounts back = EvalCounts::FromVector(v);
  CHECK(back.correct == 7);
  CHECK(back.samples == 10);
  CHECK(back.loss_sum == 4.5);
  // The servers refuse non-finite values: a NaN (or infinite) loss travels as a count of such ranks.
  for (double bad : {std::nan(""), static_cast<double>(INFINITY)}) {
    const auto diverged = EvalCounts{1, 10, bad}.ToVector();
    for (float x : diverged) CHECK(std::isfinite(x));
    std::vector<float> sum(4);
    for (std::size_t i = 0; i < 4; ++i) sum[i] = diverged[i] + v[i];  // summed with a healthy rank
    const EvalCounts all = EvalCounts::FromVector(sum);
    CHECK(all.correct == 8);
    CHECK(all.samples == 20);
    CHECK(std::isnan(all.loss_sum));
  }
}
