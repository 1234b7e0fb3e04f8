// Worker-side set-ups the tests under tests/worker/ share: every rank of a job trained on its own
// thread (worker::Train, against an in-process cluster or as loopback peers), on top of the
// session-level ones of tests/support/session_runs.h. Header-only.
//
// Failures throw std::runtime_error naming the status (the helpers run on std::async threads, where
// Catch's REQUIRE must not be used); Catch reports the exception and fails the test.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/Parallel.h>

#include "absl/strings/str_cat.h"
#include "job/job_spec.h"
#include "launch/ports.h"
#include "support/cluster.h"
#include "support/session_runs.h"
#include "worker/trainer.h"

namespace sketchps::testing {

// Trains every rank of `job` with worker::Train, one thread per rank (ps: against a fresh in-process
// cluster; decentralized: peers on free loopback ports); with a metrics_prefix, rank r writes its
// records to <prefix><r>.jsonl. Returns each rank's summary.
inline std::vector<worker::TrainSummary> TrainAllRanks(const JobSpec& job, const std::string& metrics_prefix = "") {
  at::set_num_threads(1);
  std::unique_ptr<LocalCluster> cluster;
  std::vector<std::string> peers;
  if (job.decentralized()) {
    for (std::uint32_t r = 0; r < job.workers; ++r) {
      auto port = launch::FreeLocalPort();
      if (!port.ok()) throw std::runtime_error(port.status().ToString());
      peers.push_back(absl::StrCat("127.0.0.1:", *port));
    }
  } else {
    cluster = std::make_unique<LocalCluster>(job);
  }
  std::vector<std::future<absl::StatusOr<worker::TrainSummary>>> ranks;
  for (std::uint32_t r = 0; r < job.workers; ++r) {
    worker::TrainerOptions o;
    o.job = job;
    o.rank = r;
    if (cluster) o.servers = cluster->addresses();
    if (!peers.empty()) {
      o.listen = peers[r];
      o.peers = peers;
    }
    o.patience = absl::Seconds(30);
    o.log_every_rounds = 0;
    if (!metrics_prefix.empty()) o.metrics_out = metrics_prefix + std::to_string(r) + ".jsonl";
    ranks.push_back(std::async(std::launch::async, [o] { return worker::Train(o); }));
  }
  std::vector<worker::TrainSummary> out;
  for (auto& f : ranks) {
    auto s = f.get();
    if (!s.ok()) throw std::runtime_error(absl::StrCat("rank ", out.size(), ": ", s.status().ToString()));
    out.push_back(*std::move(s));
  }
  return out;
}

}  // namespace sketchps::testing
