// ShardThreads: every shard's part of a round on a thread of its own, each started when the caller
// says the shard is ready (its gradients are complete), so that shards overlap with each other and
// with the rest of backward. The one place that runs a round's shards in parallel (engine/replica.h,
// session/session.h).
//
//   ShardThreads<RoundOutcome> threads(num_shards, [&](std::uint32_t s) { return RunShard(s); });
//   threads.Ready(s);                      // from any thread, e.g. a gradient hook; once per shard
//   auto results = threads.Wait();         // readies every shard not yet ready, joins, in shard order
//
// Wait(/*abandon=*/true) releases the shards not yet started without running them (their result is
// `abandoned`); shards already running finish. The destructor abandons and joins. Ready and Wait are
// thread-safe; Wait is called once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"

namespace sketchps {

template <class Result>
class ShardThreads {
 public:
  ShardThreads(std::uint32_t num_shards, std::function<Result(std::uint32_t)> run, Result abandoned = Result{})
      : ready_(num_shards), released_(new std::atomic<bool>[num_shards]), abandoned_(std::move(abandoned)) {
    for (std::uint32_t s = 0; s < num_shards; ++s) released_[s].store(false);
    for (std::uint32_t s = 0; s < num_shards; ++s) {
      futures_.push_back(std::async(std::launch::async, [this, s, run] {
        ready_[s].WaitForNotification();
        if (abandon_.load()) return abandoned_;
        return run(s);
      }));
    }
  }
  ShardThreads(const ShardThreads&) = delete;
  ShardThreads& operator=(const ShardThreads&) = delete;
  ~ShardThreads() {
    if (!waited_) Wait(/*abandon=*/true);
  }

  void Ready(std::uint32_t shard) {
    if (shard < ready_.size() && !released_[shard].exchange(true)) ready_[shard].Notify();
  }
  std::uint32_t num_shards() const { return static_cast<std::uint32_t>(ready_.size()); }

  std::vector<Result> Wait(bool abandon = false) {
    waited_ = true;
    abandon_.store(abandon);
    for (std::uint32_t s = 0; s < ready_.size(); ++s) Ready(s);
    std::vector<Result> out;
    for (auto& f : futures_) out.push_back(f.get());
    return out;
  }

 private:
  std::vector<absl::Notification> ready_;
  std::unique_ptr<std::atomic<bool>[]> released_;  // Ready(s) notifies once, whoever calls it first
  std::atomic<bool> abandon_{false};
  const Result abandoned_;
  std::vector<std::future<Result>> futures_;
  bool waited_ = false;
};

}  // namespace sketchps
