// Drives a ShardHost (ps/shard_host.h) in process for the shard harnesses (push, join and
// checkpoint): a fixed small job of two workers on one shard of kDim elements, replies awaited with
// a bound, and the invariants every served state must keep.
#pragma once

#include <chrono>
#include <cmath>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "common/wire/codec.h"
#include "common/wire/fingerprint.h"
#include "common/wire/layout_proto.h"
#include "fuzz/fuzz_target.h"
#include "job/job_spec.h"
#include "ps/shard_host.h"
#include "server/job_adapter.h"

namespace sketchps::fuzz {

inline constexpr std::uint64_t kDim = 16;
inline constexpr std::uint32_t kWorkers = 2;
inline constexpr char kJobId[] = "fuzz";

inline LayerTable FuzzLayers() { return MakeLayerTable({{"w", {12}}, {"b", {4}}}); }

inline const JobSpec& FuzzJob() {
  static const JobSpec job = [] {
    auto parsed =
        ParseJobSpec(DefaultJobSpecYaml(), "fuzz",
                     {"job_id=fuzz", "workers=2", "servers=1", "scheme.name=dense", "optimizer.momentum=0.9"});
    if (!parsed.ok()) Fail("host_driver", "the fuzz job does not parse: " + parsed.status().ToString());
    return *parsed;
  }();
  return job;
}

inline std::unique_ptr<ps::ShardHost> OpenFuzzHost(const std::string& checkpoint_dir, absl::Status* error = nullptr) {
  ps::HostOptions options = ps::HostOptionsFor(FuzzJob(), 0, checkpoint_dir);
  options.job.layout = FuzzLayers();
  auto host = ps::ShardHost::Open(options, nullptr);
  if (!host.ok()) {
    if (error) *error = host.status();
    return nullptr;
  }
  return *std::move(host);
}

inline std::vector<float> FuzzInitial() {
  std::vector<float> w(kDim);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * static_cast<float>(i) - 1.0f;
  return w;
}

inline Identity WorkerIdentity(std::uint32_t r) { return Identity{Identity::Role::kWorker, r}; }

// A fresh worker's Join (rounds_applied 0, the initial weights).
inline v1::JoinRequest FreshJoin(std::uint32_t worker) {
  v1::JoinRequest r;
  r.set_job_id(kJobId);
  r.set_worker_id(worker);
  r.set_shard_id(0);
  LayersToProto(FuzzLayers(), r.mutable_layers());
  const std::vector<float> w = FuzzInitial();
  r.set_weights(F32Bytes(w));
  r.set_weights_checksum(WeightsChecksum(w));
  FingerprintToProto(FuzzJob().fingerprint, r.mutable_fingerprint());
  return r;
}

// A reply that may arrive later, on another thread.
template <class T>
struct Pending {
  std::shared_ptr<std::promise<absl::StatusOr<T>>> promise = std::make_shared<std::promise<absl::StatusOr<T>>>();
  std::future<absl::StatusOr<T>> future = promise->get_future();

  std::function<void(absl::StatusOr<T>)> Callback() const {
    return [p = promise](absl::StatusOr<T> r) { p->set_value(std::move(r)); };
  }
  bool Ready(std::chrono::milliseconds wait = std::chrono::milliseconds(0)) const {
    return future.wait_for(wait) == std::future_status::ready;
  }
};

inline Pending<v1::JoinResponse> JoinLater(ps::ShardHost& host, const v1::JoinRequest& r,
                                           std::optional<Identity> caller) {
  Pending<v1::JoinResponse> p;
  host.Join(r, caller, p.Callback());
  return p;
}

inline Pending<v1::PushPullResponse> PushLater(ps::ShardHost& host, const v1::PushPullRequest& r,
                                               std::optional<Identity> caller) {
  Pending<v1::PushPullResponse> p;
  host.PushPull(r, caller, p.Callback());
  return p;
}

// The served state: finite weights whose checksum matches what the shard reports.
inline void CheckServedState(ps::ShardHost& host, const char* harness) {
  v1::GetWeightsRequest request;
  request.set_job_id(kJobId);
  auto got = host.GetWeights(request, WorkerIdentity(0));
  RequireNamed(got.status(), harness);
  if (!got.ok()) return;  // still assembling
  auto weights = ParseF32Bytes(got->weights(), kDim, "weights");
  Require(weights.ok(), harness, "served weights do not parse: " + weights.status().ToString());
  Require(WeightsChecksum(*weights) == got->weights_checksum(), harness, "served checksum does not match the weights");
}

}  // namespace sketchps::fuzz
