// Short real loadgen runs (bench/loadgen/config_run.h): two real sketchps-server processes and P = 4
// and 8 synthetic workers (ps), or P in-process peers (decentralized), 1 warm-up and 3 timed rounds
// each. The byte figures are checked against each scheme's documented per-phase formulas (scheme
// headers, engine/phase.h RawPayloadBytes: u32 indices and f32 values, 4 bytes each) and against
// the servers' own /metrics. No timing is asserted. Tagged [processes]: they start daemons.
//
// Layout: the default job's CNN (the servers take the layer table from the job's model), d =
// 220,234 over 2 shards, density 0.01: k = KOfRange(0.01, shard length) per shard.
#include <signal.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "bench/loadgen/config_run.h"
#include "bench/loadgen/synth.h"
#include "job/model_layout.h"

#ifndef SKETCHPS_SERVER_BIN
#error "SKETCHPS_SERVER_BIN: the sketchps-server executable (tests/bench/tests.cmake)"
#endif

namespace sketchps::bench {
namespace {

const LayerTable& Cnn() {
  static const LayerTable cnn = *ModelLayout("cnn");
  return cnn;
}
const double kDim = static_cast<double>(Cnn().dim());

// Σ over the 2 shards of f(k of that shard).
template <class F>
double SumOverShards(F f) {
  const ShardMap shards = *MakeShardMap(Cnn(), 2);
  double sum = 0;
  for (const auto& r : shards.ranges) sum += f(static_cast<double>(KOfRange(0.01, r.size())));
  return sum;
}

std::string TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "loadgen-test-XXXXXX").string();
  REQUIRE(mkdtemp(tmpl.data()) != nullptr);
  return tmpl;
}

// Every server a ps run started (its server.pids) has exited and been reaped.
void CheckServersGone(const std::string& work_dir) {
  std::ifstream in(std::filesystem::path(work_dir) / "server.pids");
  pid_t pid = 0;
  int listed = 0;
  while (in >> pid) {
    ++listed;
    INFO("server pid " << pid);
    CHECK((kill(pid, 0) == -1 && errno == ESRCH));
  }
  CHECK(listed == 2);
}

Figures Run(const std::string& mode, const std::string& scheme, std::uint32_t workers,
            std::vector<std::string> overrides = {}, Measurement* out = nullptr) {
  ConfigSpec spec;
  spec.mode = mode;
  spec.scheme = scheme;
  spec.workers = workers;
  spec.servers = 2;
  spec.model = "cnn";
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
  if (mode == "ps") CheckServersGone(spec.work_dir);
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

TEST_CASE("loadgen ps dense sends 4 d bytes up and down per worker per round", "[processes]") {
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

TEST_CASE("loadgen ps topk sends 8 k up and receives the union of the workers' sets", "[processes]") {
  const Figures f4 = Run("ps", "topk", 4);
  const Figures f8 = Run("ps", "topk", 8);
  for (const auto* f : {&f4, &f8}) {
    CHECK(f->raw_up == Approx(SumOverShards([](double k) { return 8 * k; })));  // u32 index + f32 value per entry
    CHECK(f->selected == Approx(SumOverShards([](double k) { return k; })));
    CheckServersAgree(*f, f == &f4 ? 4 : 8);
  }
  // The union lies between k and P k entries per shard, and grows with P.
  const double one_set = SumOverShards([](double k) { return 8 * k; });
  CHECK(f4.raw_down > one_set);
  CHECK(f4.raw_down <= 4 * one_set);
  CHECK(f8.raw_down <= 8 * one_set);
  CHECK(f8.raw_down > f4.raw_down);
  // Delta-varint indices make the wire smaller than the raw u32 + f32 pairs.
  CHECK(f4.wire_up < f4.raw_up);
}

TEST_CASE("loadgen ps gs_sgd sends the sketch and the candidates' values, constant in P", "[processes]") {
  // f32 table (raw = wire size), defaults otherwise: r = 5, c = 4 k, K = 8 k candidates, all kept.
  // Up per shard: 4 r c + 4 K; down: the candidate set (4 K) and the exact sums at every candidate (8 K).
  const double r = 5;
  const double k0 = static_cast<double>(KOfRange(0.01, MakeShardMap(Cnn(), 2)->ranges[0].size()));
  for (std::uint32_t p : {4u, 8u}) {
    const Figures f = Run("ps", "gs_sgd", p, {"scheme.gs_sgd.table=f32", "scheme.topk.unused=1"});
    CHECK(f.phases == 2);
    CHECK(f.raw_up == Approx(SumOverShards([&](double k) { return 4 * r * (4 * k) + 4 * (8 * k); })));
    CHECK(f.raw_down == Approx(SumOverShards([](double k) { return 4 * (8 * k) + 8 * (8 * k); })));
    CHECK(f.payload_per_worker_per_phase[0][0] == Approx(4 * r * 4 * k0));
    CHECK(f.payload_per_worker_per_phase[0][1] == Approx(4 * 8 * k0));
    CHECK(f.wire_up >= f.raw_up);
    CHECK(f.wire_up <= 1.05 * f.raw_up);
    CheckServersAgree(f, p);
  }
}

TEST_CASE("loadgen ps scalecom: the leader's index set once, k values from every worker", "[processes]") {
  // Per shard and round: the leader sends 4 k (index set), every worker 4 k values; over rounds
  // with distinct leaders the mean per worker is 4 k / P + 4 k. Down: the set (4 k) and the sums (8 k).
  const std::uint32_t p = 4;
  const Figures f = Run("ps", "scalecom", p);
  CHECK(f.raw_up == Approx(SumOverShards([&](double k) { return 4 * k / p + 4 * k; })));
  CHECK(f.raw_down == Approx(SumOverShards([](double k) { return 4 * k + 8 * k; })));
  CHECK(f.wire_up_max > f.wire_up_min);  // the leaders of the timed rounds sent more
  CheckServersAgree(f, p);
}

TEST_CASE("loadgen decentralized dense and gtopk_tree grow with log2 P", "[processes]") {
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
    CHECK(tree.raw_up == Approx(steps * SumOverShards([](double k) { return 8 * k; })));
  }
}

TEST_CASE("loadgen stops the servers of a configuration that times out", "[processes]") {
  ConfigSpec spec;
  spec.mode = "ps";
  spec.scheme = "topk";
  spec.workers = 4;
  spec.warmup_rounds = 1000000;  // never reached: the deadline stops the rounds first
  spec.server_bin = SKETCHPS_SERVER_BIN;
  spec.work_dir = TempDir();
  spec.timeout_seconds = 0.001;
  auto m = RunConfiguration(spec);
  CHECK(m.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(std::string(m.status().message()).find("--timeout-seconds") != std::string::npos);
  CheckServersGone(spec.work_dir);
  std::filesystem::remove_all(spec.work_dir);
}

TEST_CASE("loadgen refuses gtopk_tree in ps mode and unknown modes") {
  ConfigSpec spec;
  spec.scheme = "gtopk_tree";
  spec.mode = "ps";
  spec.work_dir = TempDir();
  CHECK(RunConfiguration(spec).status().code() == absl::StatusCode::kInvalidArgument);
  spec.scheme = "dense";
  spec.mode = "ring";
  CHECK(RunConfiguration(spec).status().code() == absl::StatusCode::kInvalidArgument);
  spec.mode = "ps";
  spec.model = "transformer";
  CHECK(RunConfiguration(spec).status().code() == absl::StatusCode::kInvalidArgument);
  std::filesystem::remove_all(spec.work_dir);
}

}  // namespace
}  // namespace sketchps::bench
