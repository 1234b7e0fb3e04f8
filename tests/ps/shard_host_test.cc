// ShardHost: validation of every request field (each bad input gets its status code and a message
// naming the field, and changes nothing), admission, idempotent pushes, numeric safety, assembly
// of a starting shard's state from the workers' offers and its checkpoint, shutdown (calls still
// waiting are answered after the grace), a worker's failure report. Every wait in this file is
// bounded (kWait).
#include "ps/shard_host.h"

#include <cmath>
#include <filesystem>
#include <future>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/checksum.h"
#include "common/wire/codec.h"
#include "common/wire/file_key.h"
#include "engine/aggregator.h"
#include "engine/phase_proto.h"
#include "engine/phase_table.h"
#include "job/job_spec.h"
#include "ps/checkpoint.h"
#include "server/job_adapter.h"

using namespace sketchps;
using namespace sketchps::ps;

namespace {

constexpr std::uint64_t kDim = 8;
constexpr auto kWait = std::chrono::seconds(10);

// The tests' job; `more` adds overrides (and may replace workers=2).
JobSpec TestJob(const std::vector<std::string>& more = {}) {
  std::vector<std::string> overrides{"job_id=t",          "workers=2",      "servers=1",
                                     "scheme.name=dense", "optimizer.lr=1", "optimizer.momentum=0"};
  overrides.insert(overrides.end(), more.begin(), more.end());
  auto job = ParseJobSpec(DefaultJobSpecYaml(), "test", overrides);
  REQUIRE(job.ok());
  return *job;
}

std::vector<float> Initial() { return {1, 2, 3, 4, 5, 6, 7, 8}; }

LayerTable Layers() { return MakeLayerTable({{"w", {static_cast<std::int64_t>(kDim)}}}); }

v1::JoinRequest JoinRequest(std::uint32_t worker, const std::vector<float>& weights = Initial(),
                            std::uint64_t rounds = 0) {
  v1::JoinRequest r;
  r.set_job_id("t");
  r.set_worker_id(worker);
  r.set_shard_id(0);
  LayersToProto(Layers(), r.mutable_layers());
  r.set_weights(F32Bytes(weights));
  r.set_weights_checksum(WeightsChecksum(weights));
  r.set_rounds_applied(rounds);
  return r;
}

// A push of job "t", shard 0, with its header filled and no spec or body yet.
v1::PushPullRequest Headed(std::uint32_t worker, std::uint64_t round, std::uint32_t phase = 0) {
  v1::PushPullRequest r;
  auto* h = r.mutable_payload()->mutable_header();
  h->set_job_id("t");
  h->set_worker_id(worker);
  h->set_shard_id(0);
  h->set_round(round);
  h->set_phase(phase);
  return r;
}

v1::PushPullRequest Push(std::uint32_t worker, std::uint64_t round, std::vector<float> values,
                         std::uint32_t phase = 0) {
  v1::PushPullRequest r = Headed(worker, round, phase);
  *r.mutable_spec() = SpecToProto(PhaseSpec{Reduction::kDenseSum});
  REQUIRE(EncodeBody(DenseValues{std::move(values)}, r.mutable_payload()).ok());
  return r;
}

// The host's callback answers as futures; waiting on them is bounded by kWait.
template <class T>
std::future<absl::StatusOr<T>> Later(std::function<void(std::function<void(absl::StatusOr<T>)>)> start) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<T>>>();
  auto future = promise->get_future();
  start([promise](absl::StatusOr<T> r) { promise->set_value(std::move(r)); });
  return future;
}

template <class T>
absl::StatusOr<T> Get(std::future<absl::StatusOr<T>>& f) {
  if (f.wait_for(kWait) != std::future_status::ready)
    return absl::DeadlineExceededError("test: no answer within kWait");
  return f.get();
}

// `caller`: the identity the call came with (nullopt: a plaintext channel, no identity checks).
std::future<absl::StatusOr<v1::JoinResponse>> JoinLater(ShardHost& host, v1::JoinRequest r,
                                                        std::optional<Identity> caller = std::nullopt) {
  return Later<v1::JoinResponse>([&host, r, caller](auto reply) { host.Join(r, caller, std::move(reply)); });
}
std::future<absl::StatusOr<v1::PushPullResponse>> PushLater(ShardHost& host, v1::PushPullRequest r,
                                                            std::optional<Identity> caller = std::nullopt) {
  return Later<v1::PushPullResponse>([&host, r, caller](auto reply) { host.PushPull(r, caller, std::move(reply)); });
}
absl::StatusOr<v1::JoinResponse> JoinNow(ShardHost& host, v1::JoinRequest r,
                                         std::optional<Identity> caller = std::nullopt) {
  auto f = JoinLater(host, std::move(r), caller);
  return Get(f);
}
absl::StatusOr<v1::PushPullResponse> PushNow(ShardHost& host, v1::PushPullRequest r,
                                             std::optional<Identity> caller = std::nullopt) {
  auto f = PushLater(host, std::move(r), caller);
  return Get(f);
}

Identity Worker(std::uint32_t r) { return Identity{Identity::Role::kWorker, r}; }

std::unique_ptr<ShardHost> OpenHost(ServerMetrics* metrics, const std::string& dir = "", std::uint64_t every = 1,
                                    const std::vector<std::string>& job = {}) {
  HostOptions options = HostOptionsFor(TestJob(job), 0, dir);
  options.job.layout = Layers();  // the tests' model: one layer of kDim
  options.checkpoint_every = every;
  auto host = ShardHost::Open(options, metrics);
  REQUIRE(host.ok());
  return *std::move(host);
}

// Both workers join with `a` and `b`; returns their answers.
std::pair<absl::StatusOr<v1::JoinResponse>, absl::StatusOr<v1::JoinResponse>> JoinBoth(ShardHost& host,
                                                                                       v1::JoinRequest a,
                                                                                       v1::JoinRequest b) {
  auto first = JoinLater(host, std::move(a));
  auto second = JoinLater(host, std::move(b));
  return {Get(first), Get(second)};
}

void JoinBoth(ShardHost& host) {
  auto [a, b] = JoinBoth(host, JoinRequest(0), JoinRequest(1));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
}

// Runs one dense round: both workers push; returns worker 1's response.
v1::PushPullResponse DenseRound(ShardHost& host, std::uint64_t round, const std::vector<float>& a,
                                const std::vector<float>& b) {
  auto first = PushLater(host, Push(0, round, a));
  auto second = PushNow(host, Push(1, round, b));
  REQUIRE(Get(first).ok());
  REQUIRE(second.ok());
  return *second;
}

// A worker's Join offering its replica at `rounds` with the final result both workers received.
v1::JoinRequest OfferAt(std::uint32_t worker, const std::vector<float>& weights, std::uint64_t rounds,
                        const v1::PushPullResponse& last) {
  v1::JoinRequest r = JoinRequest(worker, weights, rounds);
  *r.mutable_last_result() = last.result();
  r.set_last_result_contributors(2);
  return r;
}

void ExpectRejected(const absl::Status& st, absl::StatusCode code, const std::string& field) {
  CHECK(st.code() == code);
  CHECK_THAT(std::string(st.message()), Catch::Contains(field));
}

std::filesystem::path TempDir(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("sketchps-host-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace

TEST_CASE("ShardHost rejects bad joins and names the field", "[shard_host]") {
  ServerMetrics metrics(0);
  auto host = OpenHost(&metrics);
  auto wrong_job = JoinRequest(0);
  wrong_job.set_job_id("other");
  ExpectRejected(JoinNow(*host, wrong_job).status(), absl::StatusCode::kFailedPrecondition, "job_id");
  ExpectRejected(JoinNow(*host, JoinRequest(2)).status(), absl::StatusCode::kInvalidArgument, "worker_id");
  auto wrong_shard = JoinRequest(0);
  wrong_shard.set_shard_id(1);
  ExpectRejected(JoinNow(*host, wrong_shard).status(), absl::StatusCode::kInvalidArgument, "shard_id");
  auto no_layers = JoinRequest(0);
  no_layers.clear_layers();
  ExpectRejected(JoinNow(*host, no_layers).status(), absl::StatusCode::kInvalidArgument, "layers");
  ExpectRejected(JoinNow(*host, JoinRequest(0, {1, 2, 3})).status(), absl::StatusCode::kInvalidArgument, "weights");
  auto nan = Initial();
  nan[2] = std::nanf("");
  ExpectRejected(JoinNow(*host, JoinRequest(0, nan)).status(), absl::StatusCode::kInvalidArgument, "weights");
  auto no_last = JoinRequest(0, Initial(), 3);
  ExpectRejected(JoinNow(*host, no_last).status(), absl::StatusCode::kInvalidArgument, "last_result");
  CHECK(host->rounds_applied() == 0);
  CHECK_THAT(host->AssemblyStatus(), Catch::Contains("waiting for worker(s) 0, 1"));
}

TEST_CASE("A starting shard answers Joins once every worker offered, and refuses disagreeing offers", "[shard_host]") {
  auto host = OpenHost(nullptr);
  auto early = JoinLater(*host, JoinRequest(0));
  CHECK(early.wait_for(std::chrono::milliseconds(50)) == std::future_status::timeout);  // waits for worker 1
  CHECK_THAT(host->AssemblyStatus(), Catch::Contains("waiting for worker(s) 1"));
  // Pushes meanwhile are told to join again.
  CHECK(IsRejoin(PushNow(*host, Push(0, 0, std::vector<float>(kDim, 1.0f))).status()));
  auto other = Initial();
  other[0] = 9;
  auto late = JoinNow(*host, JoinRequest(1, other));
  ExpectRejected(late.status(), absl::StatusCode::kFailedPrecondition, "different replicas");
  ExpectRejected(Get(early).status(), absl::StatusCode::kFailedPrecondition, "different replicas");

  auto other_layers = JoinRequest(1);
  LayersToProto(MakeLayerTable({{"a", {4}}, {"b", {4}}}), other_layers.mutable_layers());
  ExpectRejected(JoinNow(*host, other_layers).status(), absl::StatusCode::kFailedPrecondition,
                 "layers: differ from the job's model layout");
  auto other_job = JoinRequest(1);
  (*other_job.mutable_fingerprint())["scheme"] = 42;
  ExpectRejected(JoinNow(*host, other_job).status(), absl::StatusCode::kFailedPrecondition,
                 "job fingerprint: worker 1's job differs from this one's in");

  auto [c, d] = JoinBoth(*host, JoinRequest(0), JoinRequest(1));
  REQUIRE(c.ok());
  REQUIRE(d.ok());
  CHECK(c->range_lo() == 0);
  CHECK(c->range_hi() == kDim);
  CHECK(*ParseF32Bytes(d->weights(), kDim, "w") == Initial());
  // A serving shard answers a (re)joining worker at once, and refuses another layout.
  REQUIRE(JoinNow(*host, JoinRequest(1)).ok());
  ExpectRejected(JoinNow(*host, other_layers).status(), absl::StatusCode::kFailedPrecondition, "layers");
}

TEST_CASE("ShardHost rejects every malformed push, then still completes the round once", "[shard_host]") {
  ServerMetrics metrics(0);
  auto host = OpenHost(&metrics);
  const std::vector<float> g(kDim, 1.0f);
  JoinBoth(*host);

  auto check = [&](v1::PushPullRequest r, absl::StatusCode code, const std::string& field) {
    ExpectRejected(PushNow(*host, r).status(), code, field);
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
  // Decodable but inadmissible in this phase: a short dense vector, a sparse payload in a dense phase.
  check(Push(0, 0, std::vector<float>(kDim - 2, 1.0f)), absl::StatusCode::kInvalidArgument, "dense.count");
  r = Push(0, 0, g);
  REQUIRE(EncodeBody(SparseVector{kDim, {1, 3}, {1, 1}}, r.mutable_payload()).ok());
  check(r, absl::StatusCode::kInvalidArgument, "payload");
  CHECK(host->rounds_applied() == 0);  // nothing applied

  // A valid round with a duplicate push from worker 0: applied once.
  const std::vector<float> a{1, 1, 1, 1, 1, 1, 1, 1}, b{3, 3, 3, 3, 3, 3, 3, 3};
  auto first = PushLater(*host, Push(0, 0, a));
  auto retry = PushLater(*host, Push(0, 0, a));
  auto last = PushNow(*host, Push(1, 0, b));
  REQUIRE(last.ok());
  REQUIRE(Get(first).ok());
  auto again = Get(retry);
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

TEST_CASE("An applied round cannot be reopened, and stale rounds are refused", "[shard_host]") {
  auto host = OpenHost(nullptr);
  JoinBoth(*host);
  const std::vector<float> g(kDim, 0.5f);
  DenseRound(*host, 0, g, g);
  const std::uint64_t checksum = WeightsChecksum(*ParseF32Bytes(JoinNow(*host, JoinRequest(0))->weights(), kDim, "w"));
  // A final phase the round never had, for the applied round 0: refused, nothing changes.
  auto forged = PushNow(*host, Push(0, 0, g, /*phase=*/1));
  CHECK(forged.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(IsRoundApplied(forged.status()));
  CHECK(host->rounds_applied() == 1);
  CHECK(WeightsChecksum(*ParseF32Bytes(JoinNow(*host, JoinRequest(0))->weights(), kDim, "w")) == checksum);
  // A retry of the real phase is still answered.
  REQUIRE(PushNow(*host, Push(1, 0, g)).ok());
  for (std::uint64_t round = 1; round < 4; ++round) DenseRound(*host, round, g, g);
  ExpectRejected(PushNow(*host, Push(0, 0, g)).status(), absl::StatusCode::kFailedPrecondition, "stale");
}

TEST_CASE("A round whose sum overflows is refused: no gradient, the master copy stays finite", "[shard_host]") {
  ServerMetrics metrics(0);
  auto host = OpenHost(&metrics);
  JoinBoth(*host);
  const std::vector<float> huge(kDim, 3.0e38f);  // finite; the sum of two is not
  const auto response = DenseRound(*host, 0, huge, huge);
  CHECK(response.contributors() == 0);
  CHECK(response.rounds_applied() == 1);
  CHECK(response.weights_checksum() == WeightsChecksum(Initial()));  // unchanged
  auto joined = JoinNow(*host, JoinRequest(0));
  REQUIRE(joined.ok());
  CHECK(*ParseF32Bytes(joined->weights(), kDim, "w") == Initial());
  CHECK_THAT(metrics.Text(), Catch::Contains("sketchps_rounds_refused_total{shard=\"0\"} 1"));
  // An all-skip round (every worker's gradient was not finite) completes too.
  v1::PushPullRequest skip0 = Push(0, 1, {}), skip1 = Push(1, 1, {});
  skip0.mutable_payload()->clear_body();
  skip1.mutable_payload()->clear_body();
  auto first = PushLater(*host, skip0);
  auto second = PushNow(*host, skip1);
  REQUIRE(second.ok());
  REQUIRE(Get(first).ok());
  CHECK(host->rounds_applied() == 2);
}

TEST_CASE("A shard with a checkpoint key restores its tagged checkpoint and refuses to start without the key",
          "[shard_host]") {
  const auto dir = TempDir("keyed");
  const auto key = std::make_shared<const FileKey>(*FileKey::FromBytes(std::string(32, 'k'), "test.key"));
  const auto open = [&](std::shared_ptr<const FileKey> with) {
    HostOptions options = HostOptionsFor(TestJob(), 0, dir.string());
    options.job.layout = Layers();
    options.checkpoint_every = 1;
    options.checkpoint_key = std::move(with);
    return ShardHost::Open(options, nullptr);
  };
  {
    auto host = open(key);
    REQUIRE(host.ok());
    JoinBoth(**host);
    const std::vector<float> b{1, 0, 1, 0, 1, 0, 1, 0};
    DenseRound(**host, 0, b, b);
    REQUIRE((*host)->CheckpointNow().ok());
  }
  {
    auto host = open(key);
    REQUIRE(host.ok());
    CHECK_THAT((*host)->origin(), Catch::Contains("checkpoint of round 1"));
  }
  auto keyless = open(nullptr);
  REQUIRE(!keyless.ok());
  CHECK_THAT(std::string(keyless.status().message()),
             Catch::Contains("shard-0-round-000000000001.ckpt") && Catch::Contains("--checkpoint-key-file"));
  auto other = open(std::make_shared<const FileKey>(*FileKey::FromBytes(std::string(32, 'o'), "other.key")));
  REQUIRE(!other.ok());
  CHECK_THAT(std::string(other.status().message()), Catch::Contains("integrity tag does not match"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("A restarted shard resumes from its checkpoint and answers the last round again", "[shard_host]") {
  const auto dir = TempDir("resume");
  const std::vector<float> a{1, 2, 3, 4, 5, 6, 7, 8}, b{1, 0, 1, 0, 1, 0, 1, 0};
  v1::PushPullResponse before;
  std::vector<float> weights;
  {
    auto host = OpenHost(nullptr, dir.string());
    JoinBoth(*host);
    DenseRound(*host, 0, b, b);
    before = DenseRound(*host, 1, a, b);
    REQUIRE(host->CheckpointNow().ok());
    weights = *ParseF32Bytes(JoinNow(*host, JoinRequest(0))->weights(), kDim, "w");
  }  // the shard "crashes": only the checkpoint directory survives
  auto host = OpenHost(nullptr, dir.string());
  CHECK_THAT(host->origin(), Catch::Contains("checkpoint of round 2"));
  // Both workers offer round 2 (one of them, worker 1, still waits for round 1's result).
  v1::JoinRequest offer0 = JoinRequest(0, weights, 2);
  *offer0.mutable_last_result() = before.result();
  offer0.set_last_result_contributors(2);
  v1::JoinRequest offer1 = JoinRequest(1, b, 1);  // at round 1: its replica before round 1
  *offer1.mutable_last_result() = before.result();
  offer1.mutable_last_result()->mutable_header()->set_round(0);
  auto [j0, j1] = JoinBoth(*host, offer0, offer1);
  REQUIRE(j0.ok());
  REQUIRE(j1.ok());
  CHECK(j0->rounds_applied() == 2);
  // Worker 1's retry of round 1 is answered from the checkpoint.
  auto retry = PushNow(*host, Push(1, 1, b));
  REQUIRE(retry.ok());
  CHECK(retry->result().dense().values() == before.result().dense().values());
  CHECK(retry->weights_checksum() == before.weights_checksum());
  // A later phase of round 2 that the old process had started: the worker must replay from phase 0.
  CHECK(IsReplayRound(PushNow(*host, Push(0, 2, a, /*phase=*/1)).status()));
  const auto next = DenseRound(*host, 2, a, a);
  CHECK(next.rounds_applied() == 3);
  host.reset();  // its checkpoint writer may still be writing
  std::filesystem::remove_all(dir);
}

TEST_CASE("A shard restarted behind the workers catches up from their replicas", "[shard_host]") {
  const auto dir = TempDir("behind");
  const std::vector<float> a{1, 2, 3, 4, 5, 6, 7, 8}, b{1, 0, 1, 0, 1, 0, 1, 0};
  v1::PushPullResponse last;
  std::vector<float> weights;
  {
    auto host = OpenHost(nullptr, dir.string(), /*every=*/2);
    JoinBoth(*host);
    DenseRound(*host, 0, b, b);
    DenseRound(*host, 1, a, b);         // the checkpoint of round 2 is written (every 2 rounds)
    last = DenseRound(*host, 2, a, a);  // round 3 never reaches the disk
    weights = *ParseF32Bytes(JoinNow(*host, JoinRequest(0))->weights(), kDim, "w");
  }  // the shard "crashes" without a final checkpoint
  auto host = OpenHost(nullptr, dir.string(), 2);
  CHECK_THAT(host->origin(), Catch::Contains("checkpoint of round 2"));
  CHECK(IsRejoin(PushNow(*host, Push(0, 3, a)).status()));
  auto offer = [&](std::uint32_t worker, const std::vector<float>& w) {
    v1::JoinRequest r = JoinRequest(worker, w, 3);
    *r.mutable_last_result() = last.result();
    r.set_last_result_contributors(2);
    return r;
  };
  SECTION("the replicas agree: the shard adopts round 3") {
    auto [j0, j1] = JoinBoth(*host, offer(0, weights), offer(1, weights));
    REQUIRE(j0.ok());
    REQUIRE(j1.ok());
    CHECK(j0->rounds_applied() == 3);
    CHECK(*ParseF32Bytes(j1->weights(), kDim, "w") == weights);
    CHECK(PushNow(*host, Push(1, 2, a)).ok());  // a retry of round 2 gets the adopted last result
    CHECK(DenseRound(*host, 3, a, b).rounds_applied() == 4);
  }
  SECTION("a replica that does not hash to its checksum is refused") {
    auto forged = offer(1, weights);
    forged.set_weights_checksum(forged.weights_checksum() ^ 1);
    auto [j0, j1] = JoinBoth(*host, offer(0, weights), forged);
    ExpectRejected(j0.status(), absl::StatusCode::kFailedPrecondition, "weights_checksum");
  }
  SECTION("a worker two rounds behind is refused") {
    v1::JoinRequest behind = JoinRequest(1, weights, 1);
    *behind.mutable_last_result() = last.result();
    behind.mutable_last_result()->mutable_header()->set_round(0);
    auto [j0, j1] = JoinBoth(*host, offer(0, weights), behind);
    ExpectRejected(j1.status(), absl::StatusCode::kFailedPrecondition, "that far behind");
  }
  host.reset();  // its checkpoint writer may still be writing
  std::filesystem::remove_all(dir);
}

TEST_CASE("Shutdown refuses new phases and finishes the one in flight", "[shard_host]") {
  auto host = OpenHost(nullptr);
  JoinBoth(*host);
  const std::vector<float> g(kDim, 1.0f);
  auto waiting = PushLater(*host, Push(0, 0, g));
  CHECK(host->in_flight() == 1);
  host->BeginShutdown();
  CHECK(PushNow(*host, Push(1, 0, g)).ok());  // completes the phase in flight
  CHECK(Get(waiting).ok());
  ExpectRejected(PushNow(*host, Push(0, 1, g)).status(), absl::StatusCode::kUnavailable, "shutting down");
  CHECK(host->rounds_applied() == 1);
}

TEST_CASE("After the grace, shutdown answers the calls still waiting for a gone worker", "[shard_host]") {
  auto host = OpenHost(nullptr);
  // A Join waiting for the other worker, who never comes.
  auto join = JoinLater(*host, JoinRequest(0));
  host->BeginShutdown();
  host->ReleaseInFlight();
  ExpectRejected(Get(join).status(), absl::StatusCode::kUnavailable, "shutting down");
  // A push waiting for the other worker's contribution.
  auto serving = OpenHost(nullptr);
  JoinBoth(*serving);
  auto waiting = PushLater(*serving, Push(0, 0, std::vector<float>(kDim, 1.0f)));
  CHECK(serving->in_flight() == 1);
  serving->BeginShutdown();
  serving->ReleaseInFlight();
  ExpectRejected(Get(waiting).status(), absl::StatusCode::kUnavailable, "shutting down");
  CHECK(serving->in_flight() == 0);
  CHECK(serving->rounds_applied() == 0);
  serving->ReleaseInFlight();  // nothing left: a no-op
}

TEST_CASE("A worker that reports a failure is not taken for finished", "[shard_host]") {
  auto host = OpenHost(nullptr);
  JoinBoth(*host);
  DenseRound(*host, 0, std::vector<float>(kDim, 1.0f), std::vector<float>(kDim, 1.0f));
  v1::LeaveRequest failed;
  failed.set_job_id("t");
  failed.set_worker_id(1);
  failed.set_shard_id(0);
  failed.set_rounds_applied(7);  // any round: a failure may come from anywhere
  failed.set_failed(true);
  failed.set_reason("RuntimeError: fails on purpose");
  auto answer = host->Leave(failed, std::nullopt);
  REQUIRE(answer.ok());
  CHECK(answer->workers_left() == 0);
  CHECK(!host->job_done());
  // Still checked like any Leave: the caller may only speak for itself.
  ExpectRejected(host->Leave(failed, Worker(0)).status(), absl::StatusCode::kPermissionDenied, "worker_id");
  // Finishing still works for both, and only then is the job done.
  v1::LeaveRequest leave = failed;
  leave.set_failed(false);
  leave.clear_reason();
  leave.set_rounds_applied(7);
  ExpectRejected(host->Leave(leave, std::nullopt).status(), absl::StatusCode::kFailedPrecondition, "rounds_applied");
  leave.set_rounds_applied(1);
  for (std::uint32_t w : {0u, 1u}) {
    leave.set_worker_id(w);
    REQUIRE(host->Leave(leave, std::nullopt).ok());
  }
  CHECK(host->job_done());
}

TEST_CASE("A shard restarted after workers finished still knows who left", "[shard_host]") {
  const auto dir = TempDir("left");
  v1::LeaveRequest leave;
  leave.set_job_id("t");
  leave.set_shard_id(0);
  leave.set_rounds_applied(1);
  {
    auto host = OpenHost(nullptr, dir.string());
    JoinBoth(*host);
    DenseRound(*host, 0, std::vector<float>(kDim, 1.0f), std::vector<float>(kDim, 1.0f));
    leave.set_worker_id(0);
    REQUIRE(host->Leave(leave, std::nullopt).ok());
    CHECK(!host->job_done());
  }  // killed after worker 0 finished: its checkpoint of the Leave survives
  {
    auto host = OpenHost(nullptr, dir.string());
    CHECK(!host->job_done());  // worker 1 has not finished
    // Worker 1 finishes against the restarted shard before anyone rejoined it (nobody will).
    leave.set_worker_id(1);
    auto answer = host->Leave(leave, std::nullopt);
    REQUIRE(answer.ok());
    CHECK(answer->workers_left() == 2);
    CHECK(host->job_done());
    leave.set_rounds_applied(2);
    ExpectRejected(host->Leave(leave, std::nullopt).status(), absl::StatusCode::kFailedPrecondition, "rounds_applied");
  }
  // Killed again: both departures were written, so the next start is done at once.
  auto host = OpenHost(nullptr, dir.string());
  CHECK(host->job_done());
  host.reset();
  std::filesystem::remove_all(dir);
}

TEST_CASE("A worker identity can only join, push and read as itself", "[shard_host][identity]") {
  auto host = OpenHost(nullptr);
  // Worker 1's certificate cannot join as worker 0 (e.g. to define the state) ...
  auto forged_join = JoinNow(*host, JoinRequest(0), Worker(1));
  ExpectRejected(forged_join.status(), absl::StatusCode::kPermissionDenied, "worker-1 cannot speak for worker 0");
  CHECK_THAT(host->AssemblyStatus(), Catch::Contains("waiting for worker(s) 0, 1"));  // nothing was stored
  auto a = JoinLater(*host, JoinRequest(0), Worker(0));
  auto b = JoinLater(*host, JoinRequest(1), Worker(1));
  REQUIRE(Get(a).ok());
  REQUIRE(Get(b).ok());
  // ... nor push as worker 0: refused, and worker 0's own push is then used.
  const std::vector<float> g(kDim, 1.0f), forged_g(kDim, 100.0f);
  ExpectRejected(PushNow(*host, Push(0, 0, forged_g), Worker(1)).status(), absl::StatusCode::kPermissionDenied,
                 "payload.header.worker_id");
  auto first = PushLater(*host, Push(0, 0, g), Worker(0));
  auto second = PushNow(*host, Push(1, 0, g), Worker(1));
  REQUIRE(second.ok());
  REQUIRE(Get(first).ok());
  std::vector<float> want = Initial();
  for (auto& w : want) w -= 1.0f;  // lr 1, mean gradient 1: worker 1's forged 100 was never used
  CHECK(second->weights_checksum() == WeightsChecksum(want));
  v1::GetWeightsRequest read;
  read.set_job_id("t");
  read.set_shard_id(0);
  CHECK(host->GetWeights(read, Worker(1)).ok());
  CHECK(host->GetWeights(read, std::nullopt).ok());
  ExpectRejected(host->GetWeights(read, Identity{Identity::Role::kServer, 1}).status(),
                 absl::StatusCode::kPermissionDenied, "server-1 is not a worker");
}

namespace {

// FetchSGD on the test model (d = 8, k = 1): 5 x 4 sketch tables in a kSketchMomentumError phase.
std::unique_ptr<ShardHost> OpenFetchHost(const std::string& dir, std::uint64_t every) {
  auto job = ParseJobSpec(DefaultJobSpecYaml(), "test",
                          {"job_id=t", "workers=2", "servers=1", "scheme.name=fetchsgd", "optimizer.lr=0.5"});
  REQUIRE(job.ok());
  HostOptions options = HostOptionsFor(*job, 0, dir);
  CHECK(options.job.reduction_state);
  options.job.layout = Layers();
  options.checkpoint_every = every;
  auto host = ShardHost::Open(options, nullptr);
  REQUIRE(host.ok());
  return *std::move(host);
}

v1::PushPullRequest SketchPush(std::uint32_t worker, std::uint64_t round) {
  v1::PushPullRequest r = Headed(worker, round);
  PhaseSpec spec{Reduction::kSketchMomentumError, 1};
  spec.momentum = 0.9;
  *r.mutable_spec() = SpecToProto(spec);
  std::vector<float> table(20);
  for (std::size_t c = 0; c < table.size(); ++c) {
    table[c] = std::sin(static_cast<float>(1 + c * 7 + worker * 3 + round * 11));
  }
  REQUIRE(EncodeBody(SketchTable{5, 4, 7, kDim, table}, r.mutable_payload()).ok());
  return r;
}

v1::PushPullResponse SketchRound(ShardHost& host, std::uint64_t round) {
  auto first = PushLater(host, SketchPush(0, round));
  auto second = PushNow(host, SketchPush(1, round));
  const auto answered = Get(first);
  INFO("round " << round << ": " << answered.status() << " / " << second.status());
  REQUIRE(answered.ok());
  REQUIRE(second.ok());
  return *second;
}

}  // namespace

TEST_CASE("A FetchSGD shard restarted from its checkpoint continues bitwise with its momentum and error sketches",
          "[shard_host][fetchsgd]") {
  const auto dir = TempDir("fetch-resume");
  std::vector<v1::PushPullResponse> reference;
  {
    auto host = OpenFetchHost("", 1);  // never stops
    JoinBoth(*host);
    for (std::uint64_t round = 0; round < 5; ++round) reference.push_back(SketchRound(*host, round));
  }
  std::vector<float> weights;
  {
    auto host = OpenFetchHost(dir.string(), 1);
    JoinBoth(*host);
    for (std::uint64_t round = 0; round < 3; ++round) SketchRound(*host, round);
    REQUIRE(host->CheckpointNow().ok());
    weights = *ParseF32Bytes(JoinNow(*host, JoinRequest(0))->weights(), kDim, "w");
  }  // the shard "crashes"
  auto loaded = LoadLatest(dir.string(), "t", 0);
  REQUIRE(loaded.ok());
  REQUIRE(loaded->checkpoint.has_reduction_state());
  CHECK(loaded->checkpoint.reduction_state().rows() == 5);
  CHECK(loaded->checkpoint.reduction_state().cols() == 4);
  auto host = OpenFetchHost(dir.string(), 1);
  auto [j0, j1] = JoinBoth(*host, OfferAt(0, weights, 3, reference[2]), OfferAt(1, weights, 3, reference[2]));
  REQUIRE(j0.ok());
  REQUIRE(j1.ok());
  for (std::uint64_t round = 3; round < 5; ++round) {
    const auto got = SketchRound(*host, round);
    CHECK(got.result().SerializeAsString() == reference[round].result().SerializeAsString());
    CHECK(got.weights_checksum() == reference[round].weights_checksum());
  }
  host.reset();
  std::filesystem::remove_all(dir);
}

TEST_CASE("A FetchSGD shard restarted behind the workers refuses their replica: its sketches are lost",
          "[shard_host][fetchsgd]") {
  const auto dir = TempDir("fetch-behind");
  v1::PushPullResponse last;
  std::vector<float> weights;
  {
    auto host = OpenFetchHost(dir.string(), 2);
    JoinBoth(*host);
    SketchRound(*host, 0);
    SketchRound(*host, 1);         // the checkpoint of round 2
    last = SketchRound(*host, 2);  // round 3 never reaches the disk
    weights = *ParseF32Bytes(JoinNow(*host, JoinRequest(0))->weights(), kDim, "w");
  }
  auto host = OpenFetchHost(dir.string(), 2);
  auto [j0, j1] = JoinBoth(*host, OfferAt(0, weights, 3, last), OfferAt(1, weights, 3, last));
  ExpectRejected(j0.status(), absl::StatusCode::kFailedPrecondition, "scheme.name");
  CHECK_THAT(std::string(j0.status().message()), Catch::Contains("checkpoint.every_rounds"));
  host.reset();
  std::filesystem::remove_all(dir);
}

TEST_CASE("An elastic shard answers a join at the joiner's first round, drops a leaver, and keeps the roster",
          "[shard_host][elastic]") {
  const auto dir = TempDir("elastic");
  const std::vector<std::string> elastic{"workers=3", "ps.elastic=true", "ps.initial_workers=2"};
  const std::vector<float> a{1, 2, 3, 4, 5, 6, 7, 8}, b{1, 0, 1, 0, 1, 0, 1, 0}, c{0, 0, 0, 0, 0, 0, 0, 8};
  std::vector<float> master;
  {
    auto host = OpenHost(nullptr, dir.string(), 1, elastic);
    JoinBoth(*host);  // the two initial slots are all that assembly waits for
    v1::JoinRequest join = JoinRequest(2);
    join.set_elastic_join(true);
    join.set_member_from(1);
    auto joined = JoinLater(*host, join);
    CHECK(joined.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);
    const auto r0 = DenseRound(*host, 0, a, b);
    CHECK(std::vector<std::uint32_t>(r0.absent().begin(), r0.absent().end()) == std::vector<std::uint32_t>{2});
    auto answer = Get(joined);  // answered once round 0 is applied, with the weights round 1 starts from
    REQUIRE(answer.ok());
    CHECK(answer->member_from() == 1);
    CHECK(answer->rounds_applied() == 1);
    master = *ParseF32Bytes(answer->weights(), kDim, "w");
    // Round 1 waits for the joiner and sums its push.
    auto p0 = PushLater(*host, Push(0, 1, a));
    auto p1 = PushLater(*host, Push(1, 1, b));
    CHECK(p0.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);
    auto p2 = PushNow(*host, Push(2, 1, c));
    REQUIRE(p2.ok());
    REQUIRE(Get(p0).ok());
    REQUIRE(Get(p1).ok());
    CHECK(p2->contributors() == 3);
    CHECK(p2->absent().empty());
    std::vector<float> sum(kDim);
    for (std::size_t i = 0; i < kDim; ++i) sum[i] = a[i] + b[i] + c[i];
    auto body = DecodeBody(p2->result(), kDim);
    REQUIRE(body.ok());
    REQUIRE(body->has_value());
    CHECK(std::get<DenseValues>(**body).values == sum);
    // Worker 1 leaves before round 2: round 2 is workers 0 and 2.
    v1::LeaveRequest leave;
    leave.set_job_id("t");
    leave.set_worker_id(1);
    leave.set_shard_id(0);
    leave.set_rounds_applied(2);
    REQUIRE(host->Leave(leave, std::nullopt).ok());
    CHECK(IsNotMember(PushNow(*host, Push(1, 2, b)).status()));
    auto q0 = PushLater(*host, Push(0, 2, a));
    auto q2 = PushNow(*host, Push(2, 2, c));
    REQUIRE(q2.ok());
    REQUIRE(Get(q0).ok());
    CHECK(std::vector<std::uint32_t>(q2->absent().begin(), q2->absent().end()) == std::vector<std::uint32_t>{1});
    CHECK_FALSE(host->job_done());
    REQUIRE(host->CheckpointNow().ok());
  }  // the shard "crashes"
  auto host = OpenHost(nullptr, dir.string(), 1, elastic);
  // Its checkpoint's roster: the members of round 3 are workers 0 and 2, whom assembly waits for.
  auto j0 = JoinLater(*host, JoinRequest(0));
  CHECK_THAT(host->AssemblyStatus(), Catch::Contains("waiting for worker(s) 2 to join (1 of 2 joined)"));
  auto j2 = JoinNow(*host, JoinRequest(2));
  REQUIRE(j2.ok());
  REQUIRE(Get(j0).ok());
  CHECK(j2->rounds_applied() == 3);
  host.reset();
  std::filesystem::remove_all(dir);
}

TEST_CASE("With a round deadline, a worker that died for good holds neither the rounds nor the workers' sums",
          "[shard_host]") {
  // Three workers; worker 2 joins and never pushes again (killed for good). The deadline closes
  // round 0 without it, and then the auxiliary sum (the evaluation counts), which waits for
  // left-out members too, closes without it rather than holding the job's end for ever.
  auto host = OpenHost(nullptr, "", 1, {"workers=3", "ps.round_deadline_seconds=1"});
  auto j0 = JoinLater(*host, JoinRequest(0));
  auto j1 = JoinLater(*host, JoinRequest(1));
  auto j2 = JoinLater(*host, JoinRequest(2));
  REQUIRE(Get(j0).ok());
  REQUIRE(Get(j1).ok());
  REQUIRE(Get(j2).ok());
  auto first = PushLater(*host, Push(0, 0, std::vector<float>(kDim, 1.0f)));
  auto second = PushNow(*host, Push(1, 0, std::vector<float>(kDim, 2.0f)));
  REQUIRE(Get(first).ok());
  REQUIRE(second.ok());
  CHECK(host->rounds_applied() == 1);

  auto aux = [](std::uint32_t worker, float value) {
    v1::PushPullRequest r = Headed(worker, 0, kAuxPhase);
    PhaseSpec spec{Reduction::kDenseSum};
    spec.final_phase = false;
    spec.auxiliary = true;
    *r.mutable_spec() = SpecToProto(spec);
    REQUIRE(EncodeBody(DenseValues{{value, 1.0f}}, r.mutable_payload()).ok());
    return r;
  };
  auto sum0 = PushLater(*host, aux(0, 5.0f));
  // The waiting message names the dead worker, although the round's deadline left it out.
  CHECK_THAT(host->WaitingFor(0, kAuxPhase), Catch::Contains("waiting for workers 1, 2"));
  auto sum1 = PushNow(*host, aux(1, 7.0f));
  REQUIRE(sum1.ok());
  REQUIRE(Get(sum0).ok());
  auto value = DecodeBody(sum1->result(), 2);
  REQUIRE(value.ok());
  REQUIRE(value->has_value());
  CHECK(std::get<DenseValues>(**value).values == std::vector<float>{12.0f, 2.0f});  // the two living workers'
}
