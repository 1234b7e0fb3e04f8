// scheme.values (f32 | f16 | bf16): workers push their dense and sparse values rounded to 2 bytes,
// the reduction sums float32, bytes are counted at 2 per value. Checked end to end through the
// in-process aggregator against naive references (tests/support/codec_reference.h).
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "common/wire/codec.h"
#include "engine/in_process.h"
#include "engine/phase_proto.h"
#include "engine/round.h"
#include "schemes/dense.h"
#include "schemes/registry.h"
#include "schemes/topk_ef.h"
#include "support/codec_reference.h"
#include "yaml-cpp/yaml.h"

using namespace sketchps;
using namespace sketchps::testing;

namespace {

float NaiveBFloat16(float v) {
  static const NearestBFloat16 nearest;
  return static_cast<float>(BFloat16ClosedForm(nearest(v)));
}

float NaiveHalf(float v) {
  static const NearestHalf nearest;
  return static_cast<float>(HalfClosedForm(nearest(v)));
}

float Naive(float v, ValueEncoding e) {
  return e == ValueEncoding::kBF16 ? NaiveBFloat16(v) : e == ValueEncoding::kF16 ? NaiveHalf(v) : v;
}

// Gradients of magnitude in [2^-4, 2^4): rounded to 8 or 11 significant bits, any sum of a few of
// them is exact in float32, so the reference does not depend on the order the reducer adds them.
std::vector<float> Gradient(std::uint64_t dim, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-4, 3);
  std::vector<float> g(dim);
  for (float& x : g) x = std::ldexp(rng() % 2 ? mantissa(rng) : -mantissa(rng), exponent(rng));
  return g;
}

struct WorkerRound {
  Aggregate aggregate;
  RoundTraffic traffic;
};

// One round of `make` on P workers (threads) through one in-process shard over dim entries.
std::vector<WorkerRound> RunOneRound(const SchemeMaker& make, const std::vector<std::vector<float>>& grads,
                                     std::uint64_t k) {
  const auto p = static_cast<std::uint32_t>(grads.size());
  const std::uint64_t dim = grads[0].size();
  const LayerTable layers = MakeLayerTable({{"w", {static_cast<std::int64_t>(dim)}}});
  auto map = MakeShardMap(layers, 1);
  REQUIRE(map.ok());
  OptimizerConfig opt;
  opt.momentum = 0.0;
  InProcessHub hub(p, *map, std::vector<float>(dim, 0.0f), opt, true, 10.0);
  std::vector<WorkerRound> out(p);
  std::vector<absl::Status> status(p);
  std::vector<std::thread> threads;
  for (std::uint32_t w = 0; w < p; ++w) {
    threads.emplace_back([&, w] {
      auto agg = hub.MakeAggregator(w, absl::Seconds(30));
      auto scheme = make(SchemeContext{w, p, 0, dim, layers, k, 1});
      kernels::DeviceArray<float> d_g(grads[w]);
      auto round = RunRound(*scheme, *agg, 0, RoundInfo{0, 0.0}, d_g.data());
      status[w] = round.status();
      if (round.ok()) out[w] = WorkerRound{round->aggregate, round->traffic};
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& s : status) REQUIRE(s.ok());
  return out;
}

SchemeMaker Dense(ValueEncoding values) {
  return [values](SchemeContext ctx) {
    ctx.values = values;
    return MakeDenseScheme(std::move(ctx));
  };
}

}  // namespace

TEST_CASE("Dense with values bf16 or f16 aggregates the mean of the rounded gradients", "[schemes][values]") {
  const ValueEncoding values = GENERATE(ValueEncoding::kBF16, ValueEncoding::kF16, ValueEncoding::kF32);
  const std::uint64_t dim = 1000;
  const std::vector<std::vector<float>> grads = {Gradient(dim, 1), Gradient(dim, 2), Gradient(dim, 3)};
  const auto rounds = RunOneRound(Dense(values), grads, dim);
  // The reference: every worker's gradient rounded naively, summed, divided by P (all float32).
  std::vector<float> want(dim);
  for (std::uint64_t i = 0; i < dim; ++i) {
    float sum = 0.0f;
    for (const auto& g : grads) sum += Naive(g[i], values);
    want[i] = sum / static_cast<float>(grads.size());
  }
  if (values != ValueEncoding::kF32) {
    // The rounding is visible: the reference differs from the plain mean somewhere.
    std::uint64_t differs = 0;
    for (std::uint64_t i = 0; i < dim; ++i) differs += want[i] != (grads[0][i] + grads[1][i] + grads[2][i]) / 3.0f;
    CHECK(differs > dim / 2);
  }
  for (const auto& r : rounds) {
    const auto* g = std::get_if<DenseValues>(&r.aggregate);
    REQUIRE(g != nullptr);
    CHECK(g->values == want);
    CHECK(r.traffic.bytes_up == dim * (values == ValueEncoding::kF32 ? 4 : 2));
    CHECK(r.traffic.bytes_down == dim * 4);  // the sum comes back float32
  }
}

TEST_CASE("A contribution rounded to bf16 travels in 2 bytes per value", "[schemes][values]") {
  const ValueEncoding values = GENERATE(ValueEncoding::kBF16, ValueEncoding::kF16);
  const std::uint64_t dim = 64;
  const std::vector<float> g = Gradient(dim, 9);
  auto scheme = Dense(values)(SchemeContext{0, 1, 0, dim, MakeLayerTable({{"w", {64}}}), dim, 1});
  kernels::DeviceArray<float> d_g(g);
  REQUIRE(scheme->BeginRound({0, 0.0}, d_g.data()).ok());
  auto c = scheme->Contribute(0, nullptr);
  REQUIRE(c.ok());
  CHECK(c->values == values);
  const auto& sent = std::get<DenseValues>(*c->payload).values;
  for (std::uint64_t i = 0; i < dim; ++i) CHECK(sent[i] == Naive(g[i], values));
  v1::Payload wire;
  REQUIRE(EncodeBody(*c->payload, &wire, c->values).ok());
  CHECK(wire.dense().value_encoding() == (values == ValueEncoding::kBF16 ? v1::VALUE_BF16 : v1::VALUE_F16));
  CHECK(MeasureWireBytes(wire).arrays == 2 * dim);
  auto back = DecodeBody(wire, dim);
  REQUIRE(back.ok());
  CHECK(std::get<DenseValues>(**back).values == sent);
  // A sum of rounded values (a phase result, a peer's partial sum) is not exact: it stays f32.
  std::vector<float> sum(sent);
  for (float& v : sum) v += 0x1p-20f;
  v1::Payload result;
  REQUIRE(EncodeBody(PayloadValue{DenseValues{sum}}, &result, values).ok());
  CHECK(result.dense().value_encoding() == v1::VALUE_F32);
  CHECK(MeasureWireBytes(result).arrays == 4 * dim);
}

TEST_CASE("A value beyond f16's range makes that payload travel as f32", "[schemes][values]") {
  std::vector<float> g(8, 0.25f);
  g[3] = 1e6f;
  auto scheme = Dense(ValueEncoding::kF16)(SchemeContext{0, 1, 0, 8, MakeLayerTable({{"w", {8}}}), 8, 1});
  kernels::DeviceArray<float> d_g(g);
  REQUIRE(scheme->BeginRound({0, 0.0}, d_g.data()).ok());
  auto c = scheme->Contribute(0, nullptr);
  REQUIRE(c.ok());
  CHECK(c->values == ValueEncoding::kF32);
  CHECK(std::get<DenseValues>(*c->payload).values == g);
  CHECK(RawPayloadBytes(*c->payload, c->values) == 32);
}

TEST_CASE("Top-k with values bf16 sends rounded sparse values and keeps the f32 residual", "[schemes][values]") {
  const std::uint64_t dim = 256, k = 16;
  const std::vector<float> g = Gradient(dim, 4);
  auto scheme = MakeTopKEfScheme([&] {
    SchemeContext ctx{0, 1, 0, dim, MakeLayerTable({{"w", {256}}}), k, 1};
    ctx.values = ValueEncoding::kBF16;
    return ctx;
  }());
  auto exact = MakeTopKEfScheme(SchemeContext{0, 1, 0, dim, MakeLayerTable({{"w", {256}}}), k, 1});
  kernels::DeviceArray<float> d_g(g);
  REQUIRE(scheme->BeginRound({0, 0.0}, d_g.data()).ok());
  REQUIRE(exact->BeginRound({0, 0.0}, d_g.data()).ok());
  auto c = scheme->Contribute(0, nullptr);
  auto c32 = exact->Contribute(0, nullptr);
  REQUIRE(c.ok());
  REQUIRE(c32.ok());
  const auto& s = std::get<SparseVector>(*c->payload);
  const auto& s32 = std::get<SparseVector>(*c32->payload);
  REQUIRE(s.idx == s32.idx);
  for (std::size_t i = 0; i < s.val.size(); ++i) CHECK(s.val[i] == NaiveBFloat16(s32.val[i]));
  CHECK(c->values == ValueEncoding::kBF16);
  CHECK(RawPayloadBytes(*c->payload, c->values) == k * 6);  // u32 index + 2-byte value
  // The documented decision (scheme_base.h): the rounding error is not fed back.
  CHECK(scheme->SaveState().arrays.at("residual") == exact->SaveState().arrays.at("residual"));
}

TEST_CASE("scheme.values is read for every scheme and a bad value names the key", "[schemes][values]") {
  for (const char* name : {"dense", "topk", "gtopk"}) {
    ConfigReader section(YAML::Load(std::string("{name: ") + name + ", values: bf16}"), "scheme");
    auto bound = ParseSchemeSection(section);
    REQUIRE(bound.ok());
    SchemeContext ctx{0, 1, 0, 4, MakeLayerTable({{"w", {4}}}), 1, 1};
    kernels::DeviceArray<float> d_g(std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f});
    auto scheme = bound->make(ctx);
    REQUIRE(scheme->BeginRound({0, 0.0}, d_g.data()).ok());
    auto c = scheme->Contribute(0, nullptr);
    REQUIRE(c.ok());
    CHECK(c->values == ValueEncoding::kBF16);
  }
  ConfigReader absent(YAML::Load("{name: dense}"), "scheme");
  auto plain = ParseSchemeSection(absent);
  REQUIRE(plain.ok());
  kernels::DeviceArray<float> d_g(std::vector<float>{0.1f});
  auto scheme = plain->make(SchemeContext{0, 1, 0, 1, MakeLayerTable({{"w", {1}}}), 1, 1});
  REQUIRE(scheme->BeginRound({0, 0.0}, d_g.data()).ok());
  CHECK(scheme->Contribute(0, nullptr)->values == ValueEncoding::kF32);
  ConfigReader bad(YAML::Load("{name: dense, values: fp8}"), "scheme");
  const auto refused = ParseSchemeSection(bad);
  REQUIRE_FALSE(refused.ok());
  CHECK(std::string(refused.status().message()) == "scheme.values: 'fp8' is not f32, f16 or bf16");
}
