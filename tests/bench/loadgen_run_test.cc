// Short real loadgen runs (bench/loadgen.h): two real sketchps-server processes and P = 4 and 8
// synthetic workers (ps), or P in-process peers (decentralized), a few rounds each. The byte figures
// are checked against each scheme's documented per-phase formulas (scheme headers, engine/phase.h
// RawPayloadBytes: u32 indices and f32 values, 4 bytes each) and against the servers' own /metrics.
//
// Layout: one flat layer of d = 40,000 over 2 shards of 20,000, density 0.01: k = 200 per shard.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "bench/loadgen.h"

#ifndef SKETCHPS_SERVER_BIN
#error "SKETCHPS_SERVER_BIN: the sketchps-server executable (tests/bench/tests.cmake)"
#endif

namespace sketchps::bench {
namespace {

constexpr std::uint64_t kDim = 40000;
constexpr double kK = 200;  // per shard
constexpr double kShards = 2;

std::string TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "loadgen-test-XXXXXX").string();
  REQUIRE(mkdtemp(tmpl.data()) != nullptr);
  return tmpl;
}

Figures Run(const std::string& mode, const std::string& scheme, std::uint32_t workers,
            std::vector<std::string> overrides = {}, Measurement* out = nullptr) {
  ConfigSpec spec;
  spec.mode = mode;
  spec.scheme = scheme;
  spec.workers = workers;
  spec.servers = 2;
  spec.layers = FlatLayers(kDim);
  spec.density = 0.01;
  spec.warmup_rounds = 1;
  spec.rounds = 3;
  spec.overrides = std::move(overrides);
  spec.server_bin = SKETCHPS_SERVER_BIN;
  spec.work_dir = TempDir();
  spec.timeout_seconds = 120;
  auto m = RunConfiguration(spec);
  INFO(mode << " " << scheme << " P=" << workers << ": " << (m.ok() ? "ok" : std::string(m.status().message())));
  REQUIRE(m.ok());
  auto f = Derive(*m);
  REQUIRE(f.ok());
  std::filesystem::remove_all(spec.work_dir);
  if (out) *out = *m;
  return *f;
}

double Sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

// Every PushPull request a worker sends is one the shard receives (no retries on a healthy run),
// and so for the responses: the shards' /metrics add up to P times the workers' mean.
void CheckServersAgree(const Figures& f, std::uint32_t workers) {
  REQUIRE(f.server_in.size() == 2);
  CHECK(Sum(f.server_in) == Approx(workers * f.wire_up).epsilon(1e-6));
  CHECK(Sum(f.server_out) == Approx(workers * f.wire_down).epsilon(1e-6));
  CHECK(f.busiest_link == Approx(std::max({f.server_in[0], f.server_in[1], f.server_out[0], f.server_out[1]})));
}

TEST_CASE("loadgen ps dense sends 4 d bytes up and down per worker per round") {
  for (std::uint32_t p : {4u, 8u}) {
    const Figures f = Run("ps", "dense", p);
    CHECK(f.raw_up == Approx(4.0 * kDim));
    CHECK(f.raw_down == Approx(4.0 * kDim));
    // Wire: the same f32 values plus message framing (within 5%).
    CHECK(f.wire_up >= 4.0 * kDim);
    CHECK(f.wire_up <= 1.05 * 4.0 * kDim);
    CHECK(f.wire_down <= 1.05 * 4.0 * kDim);
    CHECK(f.phases == 1);
    CheckServersAgree(f, p);
    CHECK(f.merges_per_second[0] == Approx(p * f.rounds_per_second));
  }
}

TEST_CASE("loadgen ps topk sends 8 k up and receives the union of the workers' sets") {
  const Figures f4 = Run("ps", "topk", 4);
  const Figures f8 = Run("ps", "topk", 8);
  for (const auto* f : {&f4, &f8}) {
    CHECK(f->raw_up == Approx(kShards * 8 * kK));  // u32 index + f32 value per kept entry
    CHECK(f->selected == Approx(kShards * kK));
    CheckServersAgree(*f, f == &f4 ? 4 : 8);
  }
  // The union lies between k and P k entries per shard, and grows with P.
  CHECK(f4.raw_down > kShards * 8 * kK);
  CHECK(f4.raw_down <= 4 * kShards * 8 * kK);
  CHECK(f8.raw_down <= 8 * kShards * 8 * kK);
  CHECK(f8.raw_down > f4.raw_down);
  // Delta-varint indices make the wire smaller than the raw u32 + f32 pairs.
  CHECK(f4.wire_up < f4.raw_up);
}

TEST_CASE("loadgen ps gs_sgd sends the sketch and the candidates' values, constant in P") {
  // f32 table (raw = wire size), defaults otherwise: r = 5, c = ceil(4 k) = 800, K = 8 k = 1600
  // candidates, all kept. Up per shard: 4 r c + 4 K; down: the candidate set (4 K) and the exact
  // sums at every candidate (8 K).
  const double r = 5, c = 4 * kK, big_k = 8 * kK;
  for (std::uint32_t p : {4u, 8u}) {
    const Figures f = Run("ps", "gs_sgd", p, {"scheme.gs_sgd.table=f32", "scheme.topk.unused=1"});
    CHECK(f.phases == 2);
    CHECK(f.raw_up == Approx(kShards * (4 * r * c + 4 * big_k)));
    CHECK(f.raw_down == Approx(kShards * (4 * big_k + 8 * big_k)));
    CHECK(f.payload_per_worker_per_phase[0][0] == Approx(4 * r * c));
    CHECK(f.payload_per_worker_per_phase[0][1] == Approx(4 * big_k));
    CHECK(f.wire_up >= f.raw_up);
    CHECK(f.wire_up <= 1.05 * f.raw_up);
    CheckServersAgree(f, p);
  }
}

TEST_CASE("loadgen ps scalecom: the leader's index set once, k values from every worker") {
  // Per shard and round: the leader sends 4 k (index set), every worker 4 k values; over rounds
  // with distinct leaders the mean per worker is 4 k / P + 4 k. Down: the set (4 k) and the sums (8 k).
  const std::uint32_t p = 4;
  const Figures f = Run("ps", "scalecom", p);
  CHECK(f.raw_up == Approx(kShards * (4 * kK / p + 4 * kK)));
  CHECK(f.raw_down == Approx(kShards * (4 * kK + 8 * kK)));
  CHECK(f.wire_up_max > f.wire_up_min);  // the leaders of the timed rounds sent more
  CheckServersAgree(f, p);
}

TEST_CASE("loadgen decentralized dense and gtopk_tree grow with log2 P") {
  // Recursive doubling: each rank sends log2 P partial states per collective (power-of-two P):
  // dense 4 d each, the gTop-k tree k kept entries (8 k bytes) per shard each.
  for (std::uint32_t p : {4u, 8u}) {
    const double steps = std::log2(p);
    const Figures dense = Run("decentralized", "dense", p);
    CHECK(dense.raw_up == Approx(steps * 4.0 * kDim));
    CHECK(dense.raw_down == Approx(steps * 4.0 * kDim));
    CHECK(dense.payload_up == Approx(4.0 * kDim));  // the scheme's own contribution
    CHECK(dense.server_in.empty());
    const Figures tree = Run("decentralized", "gtopk_tree", p);
    CHECK(tree.raw_up == Approx(steps * kShards * 8 * kK));
  }
}

TEST_CASE("loadgen refuses gtopk_tree in ps mode and unknown modes") {
  ConfigSpec spec;
  spec.scheme = "gtopk_tree";
  spec.mode = "ps";
  spec.layers = FlatLayers(1000);
  spec.work_dir = TempDir();
  CHECK(RunConfiguration(spec).status().code() == absl::StatusCode::kInvalidArgument);
  spec.scheme = "dense";
  spec.mode = "ring";
  CHECK(RunConfiguration(spec).status().code() == absl::StatusCode::kInvalidArgument);
  std::filesystem::remove_all(spec.work_dir);
}

}  // namespace
}  // namespace sketchps::bench
