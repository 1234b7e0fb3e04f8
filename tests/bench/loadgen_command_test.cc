// The loadgen's option checks and configuration list (bench/loadgen/loadgen.h), the job binding of
// one configuration (bench/loadgen/config.h) and the assembly of counter snapshots into a
// Measurement (bench/loadgen/collect.h), against hand-computed values. No servers, no timing.
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <catch2/catch.hpp>

#include "bench/loadgen/collect.h"
#include "bench/loadgen/config.h"
#include "bench/loadgen/loadgen.h"

namespace sketchps::bench {
namespace {

LoadgenOptions Valid() {
  LoadgenOptions o;
  o.modes = {"ps", "decentralized"};
  o.workers = {4, 8};
  o.schemes = {"topk", "gtopk_tree"};
  return o;
}

std::string ErrorOf(const LoadgenOptions& o) { return std::string(ValidateOptions(o).message()); }

TEST_CASE("ValidateOptions accepts a valid sweep and names the flag of each bad one") {
  CHECK(ValidateOptions(Valid()).ok());
  LoadgenOptions o = Valid();
  o.workers = {4, 0};
  CHECK(ErrorOf(o).find("--workers: 0 is not in [1, 1024]") != std::string::npos);
  o = Valid();
  o.workers = {2048};
  CHECK(ErrorOf(o).find("--workers: 2048") != std::string::npos);
  o = Valid();
  o.modes = {"ring"};
  CHECK(ErrorOf(o).find("--mode: 'ring'") != std::string::npos);
  o = Valid();
  o.schemes = {"topk", "qsgd"};
  CHECK(ErrorOf(o).find("unknown scheme 'qsgd'") != std::string::npos);
  o = Valid();
  o.modes = {"ps"};
  CHECK(ErrorOf(o).find("gtopk_tree") != std::string::npos);
  o = Valid();
  o.model = "transformer";
  CHECK(ErrorOf(o).find("transformer") != std::string::npos);
  o = Valid();
  o.overrides = {"optimizer.momentum=fast"};
  CHECK(ErrorOf(o).find("optimizer.momentum") != std::string::npos);
  o = Valid();
  o.gradients_dir = "/nonexistent/loadgen-dumps";
  CHECK(ErrorOf(o).find("--gradients") != std::string::npos);
  o = Valid();
  o.out = "/nonexistent/dir/sweep.json";
  CHECK(ErrorOf(o).find("--out") != std::string::npos);
  o = Valid();
  o.rounds = 0;
  CHECK(ErrorOf(o).find("--rounds") != std::string::npos);
}

TEST_CASE("SweepConfigs lists modes, then schemes, then P, with gtopk_tree only in decentralized mode") {
  const auto configs = SweepConfigs(Valid());
  REQUIRE(configs.size() == 2 + 4);  // ps: topk at 4 and 8; decentralized: topk and gtopk_tree at 4 and 8
  CHECK(ConfigName(configs[0]) == "ps topk P=4");
  CHECK(ConfigName(configs[1]) == "ps topk P=8");
  CHECK(ConfigName(configs[2]) == "decentralized topk P=4");
  CHECK(ConfigName(configs[5]) == "decentralized gtopk_tree P=8");
  CHECK(configs[5].model == "cnn");
}

TEST_CASE("ConfigJob binds the configuration's keys and drops other schemes' overrides") {
  ConfigSpec spec;
  spec.mode = "decentralized";
  spec.scheme = "gtopk_tree";
  spec.workers = 16;
  spec.density = 0.02;
  spec.overrides = {"scheme.gs_sgd.table=f32", "optimizer.momentum=0.5"};
  auto job = ConfigJob(spec);
  REQUIRE(job.ok());
  CHECK(job->scheme.name == "gtopk");
  CHECK(job->workers == 16);
  CHECK(job->decentralized());
  CHECK(job->scheme.density == Approx(0.02));
  CHECK(job->optimizer.momentum == Approx(0.5));
  CHECK(job->layout.dim() == 220234);                           // the CNN
  CHECK(job->effective_yaml.find("f32") == std::string::npos);  // gs_sgd's key is not gtopk's
  spec.overrides = {"scheme.gtopk.no_such_key=1"};
  CHECK(ConfigJob(spec).status().code() == absl::StatusCode::kInvalidArgument);
}

// Worker w sent (w + 1) * 100 payload bytes and received 50 per round in phase 0 of shard 0 over
// 2 timed rounds; its transport counted 10x that on the wire.
WorkerWindow Window(std::uint32_t w, bool counts_raw) {
  WorkerWindow win;
  win.start.phases = win.end.phases = PhaseSlots(2);
  win.start.phases[0][0] = PhaseTotals{1000, 500, 3};  // after the warm-up
  win.end.phases[0][0] = PhaseTotals{1000 + 200 * (w + 1), 600, 5};
  win.start.transport = TransportCounters{7, 9, counts_raw, 1, 2, {}};
  win.end.transport = TransportCounters{7 + 2000 * (w + 1), 9 + 1000, counts_raw, 1 + 300, 2 + 400, {}};
  win.selected = 40;
  return win;
}

TEST_CASE("params gives a flat custom layout of N parameters in every configuration") {
  LoadgenOptions o = Valid();
  o.params = 1000000;
  REQUIRE(ValidateOptions(o).ok());
  const auto configs = SweepConfigs(o);
  REQUIRE(!configs.empty());
  for (const auto& c : configs) CHECK(c.params == 1000000);
  auto job = ConfigJob(configs.back());
  REQUIRE(job.ok());
  CHECK(job->model == "custom");
  CHECK(job->layout.dim() == 1000000);
  REQUIRE(job->layout.layers.size() == 1);
  CHECK(job->layout.layers[0].name == kFlatLayerName);
  CHECK(job->effective_yaml.find("1000000") != std::string::npos);  // the servers read the layout from it
  ConfigSpec plain = configs.back();
  plain.params = 0;
  auto cnn = ConfigJob(plain);
  REQUIRE(cnn.ok());
  CHECK(cnn->layout.dim() == 220234);
}

TEST_CASE("params out of range or below the shard count or with gradient dumps is refused naming the flag") {
  LoadgenOptions o = Valid();
  o.params = 999;
  CHECK(ErrorOf(o).find("--params: 999 is not in [1000, 200000000]") != std::string::npos);
  o.params = 200000001;
  CHECK(ErrorOf(o).find("--params: 200000001") != std::string::npos);
  o.params = 1000;
  o.servers = 2000;
  CHECK(ErrorOf(o).find("cannot be split over 2000 shards (--servers)") != std::string::npos);
  o = Valid();
  o.params = 5000;
  o.gradients_dir = "/nonexistent/loadgen-dumps";
  CHECK(ErrorOf(o).find("--params: the dumps of --gradients") != std::string::npos);
}

TEST_CASE("the loadgen command refuses params together with model") {
  CLI::App app;
  LoadgenOptions o;
  AddLoadgenCommand(app, o);
  CHECK_THROWS_AS(app.parse(std::vector<std::string>{"25000000", "--params", "resnet", "--model", "loadgen"}),
                  CLI::ExcludesError);
  LoadgenOptions p;
  CLI::App app2;
  AddLoadgenCommand(app2, p);
  app2.parse(std::vector<std::string>{"25000000", "--params", "loadgen"});  // CLI11: reversed argv
  CHECK(p.params == 25000000);
}

TEST_CASE("Assemble takes counter deltas over the timed rounds") {
  const MeasurementHeader h{"ps", "topk", 2, 2, 1000, 0.01, 2, {0.5, 1.5}, 1e9};
  const Measurement m =
      Assemble(h, {Window(0, false), Window(1, false)}, {{100, 200}, {10, 20}}, {{700, 500}, {40, 20}});
  CHECK(m.seconds == Approx(2.0));
  REQUIRE(m.workers_totals.size() == 2);
  CHECK(m.workers_totals[1].wire_up == 4000);
  CHECK(m.workers_totals[1].wire_down == 1000);
  CHECK(m.workers_totals[1].payload_up == 400);
  CHECK(m.workers_totals[1].raw_up == 400);  // the scheme's payloads: this transport counts no raw bytes
  CHECK(m.workers_totals[0].raw_down == 100);
  CHECK(m.workers_totals[0].selected == 40);
  REQUIRE(m.shard_phases.size() == 2);
  REQUIRE(m.shard_phases[0].size() == 1);  // one phase had traffic
  CHECK(m.shard_phases[0][0].payload_bytes == 200 + 400);
  CHECK(m.shard_phases[0][0].contributions == 4);
  REQUIRE(m.server_totals.size() == 2);
  CHECK(m.server_totals[0].bytes_in == Approx(600));
  CHECK(m.server_totals[1].bytes_out == Approx(0));
  // A transport that forwards others' payloads (peers) counts its own raw bytes.
  const Measurement d = Assemble(h, {Window(0, true), Window(1, true)}, {}, {});
  CHECK(d.workers_totals[0].raw_up == 300);
  CHECK(d.workers_totals[0].raw_down == 400);
  CHECK(d.workers_totals[0].payload_up == 200);
  CHECK(d.server_totals.empty());
}

}  // namespace
}  // namespace sketchps::bench
