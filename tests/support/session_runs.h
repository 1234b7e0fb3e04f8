// Session-level set-ups the tests under tests/session/ and tests/worker/ share: the small MLP job,
// sessions opened and joined as the Python package drives them, every rank run against a fresh
// in-process cluster with its own state folder, and a temporary folder. Header-only; no libtorch
// (tests/support/worker_runs.h adds the trainer's).
//
// Failures throw std::runtime_error naming the status (the helpers run on std::async threads, where
// Catch's REQUIRE must not be used); Catch reports the exception and fails the test.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "job/job_spec.h"
#include "session/session.h"
#include "support/cluster.h"
#include "support/device_memory.h"

namespace sketchps::testing {

// The default job with the MLP, two servers, no evaluation and batches of 16, then `overrides`.
inline JobSpec MlpJob(std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), {"model=mlp", "servers=2", "train.eval_every_rounds=0", "data.batch_size=16"});
  auto job = ParseJobSpec(DefaultJobSpecYaml(), "test", overrides);
  if (!job.ok()) throw std::runtime_error(job.status().ToString());
  return *std::move(job);
}

// A session of rank `rank` joined to `servers` (state_dir: SessionOptions::state_dir), from the
// tests' fixed initial weights w[j] = 0.01 (j mod 13) or wherever the servers are. `local`: the
// worker's local state handed to Session::Join (the inner optimizer of train.inner_state keep).
struct JoinedSession {
  std::unique_ptr<session::Session> session;
  std::vector<float> w;                        // the weights to train (the servers' after Join)
  std::uint64_t first = 0;                     // the round it starts with
  kernels::DeviceMemoryRegistration w_memory;  // w, for the kernels' checks (support/device_memory.h)
};

inline JoinedSession JoinSession(const JobSpec& job, std::uint32_t rank, const std::vector<std::string>& servers,
                                 const std::string& state_dir, session::WorkerLocalState* local = nullptr) {
  session::SessionOptions o;
  o.job = job;
  o.rank = rank;
  o.servers = servers;
  o.patience = absl::Seconds(30);
  o.state_dir = state_dir;
  JoinedSession out;
  out.w.resize(job.layout.dim());
  for (std::size_t j = 0; j < out.w.size(); ++j) out.w[j] = 0.01f * static_cast<float>(j % 13);
  out.w_memory = AsDeviceMemory(out.w);
  auto session = session::Session::Create(o, job.layout, out.w.data());
  if (!session.ok()) throw std::runtime_error(session.status().ToString());
  out.session = *std::move(session);
  auto first = out.session->Join(out.w.data(), local);
  if (!first.ok()) throw std::runtime_error(first.status().ToString());
  out.first = *first;
  return out;
}

// Runs run(rank, servers, state_dir) for every rank of `job` on its own thread against a fresh
// in-process cluster; state_dir is <state_root>/w<rank> (empty without a root). Returns each rank's
// result (its final weights).
template <typename RunRank>
std::vector<std::vector<float>> RunRanksOnCluster(const JobSpec& job, const std::string& state_root, RunRank run) {
  LocalCluster cluster(job);
  std::vector<std::future<std::vector<float>>> ranks;
  for (std::uint32_t r = 0; r < job.workers; ++r) {
    const std::string dir =
        state_root.empty() ? "" : (std::filesystem::path(state_root) / absl::StrCat("w", r)).string();
    ranks.push_back(std::async(std::launch::async, [&, r, dir] { return run(r, cluster.addresses(), dir); }));
  }
  std::vector<std::vector<float>> out;
  for (auto& f : ranks) out.push_back(f.get());
  return out;
}

// A temporary folder (not created), removed with its contents when the object goes.
struct TempDir {
  explicit TempDir(const std::string& prefix = "sketchps-test")
      : path(std::filesystem::temp_directory_path() / absl::StrCat(prefix, "-", ::getpid(), "-", std::rand())) {}
  ~TempDir() { std::filesystem::remove_all(path); }
  std::filesystem::path path;
};

}  // namespace sketchps::testing
