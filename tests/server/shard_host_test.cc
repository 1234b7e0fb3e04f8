// ShardHost: validation of every request field (each bad input gets its status code and a message
// naming the field, and changes nothing), idempotent pushes, restart from a checkpoint, shutdown.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <future>
#include <limits>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "common/codec.h"
#include "engine/phase_table.h"
#include "engine/wire.h"
#include "server/shard_host.h"

using namespace sketchps;
using namespace sketchps::server;

namespace {

constexpr std::uint64_t kDim = 8;

JobSpec TestJob() {
  auto job = ParseJobSpec(DefaultJobSpecYaml(), "test",
                          {"job_id=t", "workers=2", "servers=1", "scheme.name=dense", "optimizer.lr=1", "optimizer.momentum=0"});
  REQUIRE(job.ok());
  return *job;
}

std::vector<float> Initial() { return {1, 2, 3, 4, 5, 6, 7, 8}; }

v1::JoinRequest JoinRequest(std::uint32_t worker, const std::vector<float>& weights = Initial()) {
  v1::JoinRequest r;
  r.set_job_id("t");
  r.set_worker_id(worker);
  r.set_shard_id(0);
  LayersToProto(MakeLayerTable({{"w", {static_cast<std::int64_t>(kDim)}}}), r.mutable_layers());
  r.set_initial_weights(F32Bytes(weights));
  return r;
}

v1::PushPullRequest Push(std::uint32_t worker, std::uint64_t round, std::vector<float> values, std::uint32_t phase = 0) {
  v1::PushPullRequest r;
  auto* h = r.mutable_payload()->mutable_header();
  h->set_job_id("t");
  h->set_worker_id(worker);
  h->set_shard_id(0);
  h->set_round(round);
  h->set_phase(phase);
  *r.mutable_spec() = SpecToProto(PhaseSpec{Reduction::kDenseSum});
  REQUIRE(EncodeBody(DenseValues{std::move(values)}, r.mutable_payload()).ok());
  return r;
}

std::unique_ptr<ShardHost> OpenHost(ServerMetrics* metrics, const std::string& dir = "") {
  auto host = ShardHost::Open(HostOptions{TestJob(), 0, dir, 1, absl::Seconds(5)}, metrics);
  REQUIRE(host.ok());
  return *std::move(host);
}

void JoinBoth(ShardHost& host) {
  REQUIRE(host.Join(JoinRequest(0)).ok());
  REQUIRE(host.Join(JoinRequest(1)).ok());
}

absl::Time Soon() { return absl::Now() + absl::Seconds(5); }

// Runs one dense round: both workers push; returns worker 1's response.
v1::PushPullResponse DenseRound(ShardHost& host, std::uint64_t round, const std::vector<float>& a, const std::vector<float>& b) {
  auto first = std::async(std::launch::async, [&] { return host.PushPull(Push(0, round, a), Soon()); });
  auto second = host.PushPull(Push(1, round, b), Soon());
  REQUIRE(first.get().ok());
  REQUIRE(second.ok());
  return *second;
}

void ExpectRejected(const absl::Status& st, absl::StatusCode code, const std::string& field) {
  CHECK(st.code() == code);
  CHECK_THAT(std::string(st.message()), Catch::Contains(field));
}

}  // namespace

TEST_CASE("ShardHost rejects bad joins and names the field", "[shard_host]") {
  ServerMetrics metrics(0);
  auto host = OpenHost(&metrics);
  auto wrong_job = JoinRequest(0);
  wrong_job.set_job_id("other");
  ExpectRejected(host->Join(wrong_job).status(), absl::StatusCode::kFailedPrecondition, "job_id");
  ExpectRejected(host->Join(JoinRequest(2)).status(), absl::StatusCode::kInvalidArgument, "worker_id");
  auto wrong_shard = JoinRequest(0);
  wrong_shard.set_shard_id(1);
  ExpectRejected(host->Join(wrong_shard).status(), absl::StatusCode::kInvalidArgument, "shard_id");
  auto no_layers = JoinRequest(0);
  no_layers.clear_layers();
  ExpectRejected(host->Join(no_layers).status(), absl::StatusCode::kInvalidArgument, "layers");
  ExpectRejected(host->Join(JoinRequest(0, {1, 2, 3})).status(), absl::StatusCode::kInvalidArgument, "initial_weights");
  auto nan = Initial();
  nan[2] = std::nanf("");
  ExpectRejected(host->Join(JoinRequest(0, nan)).status(), absl::StatusCode::kInvalidArgument, "initial_weights");
  CHECK(host->rounds_applied() == 0);

  auto joined = host->Join(JoinRequest(0));
  REQUIRE(joined.ok());
  CHECK(joined->range_lo() == 0);
  CHECK(joined->range_hi() == kDim);
  CHECK(*ParseF32Bytes(joined->weights(), kDim, "w") == Initial());
  auto other = Initial();
  other[0] = 9;
  ExpectRejected(host->Join(JoinRequest(1, other)).status(), absl::StatusCode::kInvalidArgument, "initial_weights");
  auto other_layers = JoinRequest(1);
  LayersToProto(MakeLayerTable({{"a", {4}}, {"b", {4}}}), other_layers.mutable_layers());
  ExpectRejected(host->Join(other_layers).status(), absl::StatusCode::kInvalidArgument, "layers");
  CHECK(host->Join(JoinRequest(1)).ok());
}

TEST_CASE("ShardHost rejects every malformed push, then still completes the round once", "[shard_host]") {
  ServerMetrics metrics(0);
  auto host = OpenHost(&metrics);
  const std::vector<float> g(kDim, 1.0f);
  ExpectRejected(host->PushPull(Push(0, 0, g), Soon()).status(), absl::StatusCode::kFailedPrecondition, "Join first");
  JoinBoth(*host);

  auto check = [&](v1::PushPullRequest r, absl::StatusCode code, const std::string& field) {
    ExpectRejected(host->PushPull(r, Soon()).status(), code, field);
  };
  auto r = Push(0, 0, g);
  r.mutable_payload()->mutable_header()->set_job_id("x");
  check(r, absl::StatusCode::kFailedPrecondition, "payload.header.job_id");
  r = Push(0, 0, g);
  r.mutable_payload()->mutable_header()->set_epoch(3);
  check(r, absl::StatusCode::kFailedPrecondition, "payload.header.epoch");
  check(Push(2, 0, g), absl::StatusCode::kInvalidArgument, "payload.header.worker_id");
  r = Push(0, 0, g);
  r.mutable_payload()->mutable_header()->set_shard_id(4);
  check(r, absl::StatusCode::kInvalidArgument, "payload.header.shard_id");
  check(Push(0, 0, g, /*phase=*/99), absl::StatusCode::kInvalidArgument, "payload.header.phase");
  check(Push(0, 3, g), absl::StatusCode::kFailedPrecondition, "payload.header.round");
  check(Push(0, 0, std::vector<float>(kDim + 1, 1.0f)), absl::StatusCode::kInvalidArgument, "dense.count");
  auto nan = g;
  nan[5] = std::numeric_limits<float>::infinity();
  check(Push(0, 0, nan), absl::StatusCode::kInvalidArgument, "dense.values");
  r = Push(0, 0, g);
  r.mutable_payload()->mutable_dense()->mutable_values()->resize(7);
  check(r, absl::StatusCode::kInvalidArgument, "dense.values");
  r = Push(0, 0, g);
  REQUIRE(EncodeBody(SparseVector{kDim, {1, 3}, {1, 1}}, r.mutable_payload()).ok());
  r.mutable_payload()->mutable_sparse()->set_dim(1u << 20);
  check(r, absl::StatusCode::kInvalidArgument, "sparse.dim");
  r = Push(0, 0, g);
  r.mutable_spec()->set_leader(7);
  check(r, absl::StatusCode::kInvalidArgument, "spec.leader");
  r = Push(0, 0, g);
  r.mutable_spec()->set_reduction(static_cast<v1::ReductionKind>(9));
  check(r, absl::StatusCode::kInvalidArgument, "spec.reduction");
  CHECK(host->rounds_applied() == 0);  // nothing applied

  // A valid round with a duplicate push from worker 0: applied once.
  const std::vector<float> a{1, 1, 1, 1, 1, 1, 1, 1}, b{3, 3, 3, 3, 3, 3, 3, 3};
  auto first = std::async(std::launch::async, [&] { return host->PushPull(Push(0, 0, a), Soon()); });
  while (metrics.Text().find("sketchps_pushes_total{outcome=\"accepted\",shard=\"0\"} 1") == std::string::npos) {
    absl::SleepFor(absl::Milliseconds(1));  // the retry below must arrive after the first push is in
  }
  auto retry = std::async(std::launch::async, [&] { return host->PushPull(Push(0, 0, a), Soon()); });
  auto last = host->PushPull(Push(1, 0, b), Soon());
  REQUIRE(last.ok());
  REQUIRE(first.get().ok());
  auto again = retry.get();
  REQUIRE(again.ok());
  auto sum = DecodeBody(again->result(), kDim);
  REQUIRE(sum.ok());
  CHECK(std::get<DenseValues>(**sum).values == std::vector<float>(kDim, 4.0f));
  CHECK(last->contributors() == 2);
  // lr 1, G = mean = 2: w - 2.
  std::vector<float> want = Initial();
  for (auto& w : want) w -= 2.0f;
  CHECK(host->rounds_applied() == 1);
  CHECK(last->rounds_applied() == 1);
  CHECK(last->weights_checksum() == WeightsChecksum(want));
  const std::string text = metrics.Text();
  CHECK_THAT(text, Catch::Contains("sketchps_pushes_total{outcome=\"duplicate\",shard=\"0\"} 1"));
  CHECK_THAT(text, Catch::Contains("sketchps_pushes_total{outcome=\"accepted\",shard=\"0\"} 2"));
  CHECK_THAT(text, Catch::Contains("sketchps_rounds_applied{shard=\"0\"} 1"));
  CHECK_THAT(text, Catch::Contains("sketchps_straggler_wait_seconds_count{shard=\"0\"} 1"));  // one phase
  CHECK_THAT(text, Catch::Contains("sketchps_phase_wait_seconds_count{shard=\"0\"} 3"));      // three calls
}

TEST_CASE("ShardHost rejects stale rounds", "[shard_host]") {
  auto host = OpenHost(nullptr);
  JoinBoth(*host);
  const std::vector<float> g(kDim, 0.5f);
  for (std::uint64_t round = 0; round < 4; ++round) DenseRound(*host, round, g, g);
  ExpectRejected(host->PushPull(Push(0, 0, g), Soon()).status(), absl::StatusCode::kFailedPrecondition, "stale");
}

TEST_CASE("A restarted shard resumes from its checkpoint and answers the last round again", "[shard_host]") {
  const auto dir = std::filesystem::temp_directory_path() / ("sketchps-host-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::vector<float> a{1, 2, 3, 4, 5, 6, 7, 8}, b{1, 0, 1, 0, 1, 0, 1, 0};
  v1::PushPullResponse before;
  std::uint64_t checksum = 0;
  {
    auto host = OpenHost(nullptr, dir.string());
    JoinBoth(*host);
    DenseRound(*host, 0, b, b);
    before = DenseRound(*host, 1, a, b);
    checksum = before.weights_checksum();
  }  // the shard "crashes": only the checkpoint directory survives
  auto host = OpenHost(nullptr, dir.string());
  CHECK_THAT(host->origin(), Catch::Contains("restored round 2"));
  CHECK(host->rounds_applied() == 2);
  // Worker 1 never got round 1's result: its retry is answered from the checkpoint.
  auto retry = host->PushPull(Push(1, 1, b), Soon());
  REQUIRE(retry.ok());
  CHECK(retry->result().dense().values() == before.result().dense().values());
  CHECK(retry->weights_checksum() == checksum);
  // A later phase of round 2 that the old process had started: the worker must replay from phase 0.
  CHECK(IsReplayRound(host->PushPull(Push(0, 2, a, /*phase=*/1), Soon()).status()));
  auto joined = host->Join(JoinRequest(0));
  REQUIRE(joined.ok());
  CHECK(joined->rounds_applied() == 2);
  CHECK(WeightsChecksum(*ParseF32Bytes(joined->weights(), kDim, "w")) == checksum);
  const auto next = DenseRound(*host, 2, a, a);
  CHECK(next.rounds_applied() == 3);
  std::filesystem::remove_all(dir);
}

TEST_CASE("Shutdown refuses new phases and finishes the one in flight", "[shard_host]") {
  auto host = OpenHost(nullptr);
  JoinBoth(*host);
  const std::vector<float> g(kDim, 1.0f);
  auto waiting = std::async(std::launch::async, [&] { return host->PushPull(Push(0, 0, g), Soon()); });
  while (host->in_flight() == 0) absl::SleepFor(absl::Milliseconds(1));
  host->BeginShutdown();
  CHECK(host->PushPull(Push(1, 0, g), Soon()).ok());  // completes the phase in flight
  CHECK(waiting.get().ok());
  ExpectRejected(host->PushPull(Push(0, 1, g), Soon()).status(), absl::StatusCode::kUnavailable, "shutting down");
  CHECK(host->rounds_applied() == 1);
}
