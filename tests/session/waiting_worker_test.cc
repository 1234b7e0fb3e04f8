// A round that waits for a worker that never pushes names that worker: the shard answers the others'
// PushPull shortly before their deadline with whom the phase waits for (ps/service.h,
// ShardHost::WaitingFor), so the worker that gives up says "waiting for worker 1" instead of a bare
// "Deadline Exceeded" that blames the shard it was talking to. Real gRPC on loopback
// (tests/support/cluster.h), sessions as the trainer drives them.
#include <future>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "job/job_spec.h"
#include "session/session.h"
#include "support/cluster.h"
#include "support/device_memory.h"

using namespace sketchps;
using namespace sketchps::session;

namespace {

JobSpec Job() {
  auto job = ParseJobSpec(
      "job_id: waiting\nmodel: custom\nlayers: [[\"a\", [50]]]\nworkers: 2\nservers: 1\ntrain: {rounds: 4}\n"
      "scheme: {name: dense}\n",
      "t.yaml");
  REQUIRE(job.ok());
  return *job;
}

std::unique_ptr<Session> Joined(const JobSpec& job, std::uint32_t rank, const std::vector<std::string>& servers,
                                std::vector<float>& w) {
  SessionOptions o;
  o.job = job;
  o.rank = rank;
  o.servers = servers;
  o.rpc_timeout = absl::Seconds(2);
  o.patience = absl::Seconds(3);
  auto session = Session::Create(o, job.layout, w.data());
  if (!session.ok()) throw std::runtime_error(session.status().ToString());
  if (auto first = (*session)->Join(w.data()); !first.ok()) throw std::runtime_error(first.status().ToString());
  return *std::move(session);
}

}  // namespace

TEST_CASE("A round waiting for a worker that never pushes names that worker to the others", "[worker][grpc]") {
  const JobSpec job = Job();
  testing::LocalCluster cluster(job);
  std::vector<float> w0(job.layout.dim(), 0.5f), w1 = w0;
  const auto w0_memory = testing::AsDeviceMemory(w0), w1_memory = testing::AsDeviceMemory(w1);
  auto second = std::async(std::launch::async, [&] { return Joined(job, 1, cluster.addresses(), w1); });
  auto first = Joined(job, 0, cluster.addresses(), w0);
  auto silent = second.get();  // joined, and never pushes
  const std::vector<float> g(job.layout.dim(), 1.0f);
  const auto g_memory = testing::AsDeviceMemory(g);
  auto record = first->Step(0, 0.0f, g.data(), w0.data());
  REQUIRE(!record.ok());
  const std::string message(record.status().message());
  INFO(message);
  CHECK_THAT(message, Catch::Contains("round 0 phase 0 on shard 0 is waiting for worker 1 (worker 0 pushed)"));
}
