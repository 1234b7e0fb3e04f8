#include "engine/strand.h"

#include <utility>

namespace sketchps {

Strand::Strand(std::string name) : name_(std::move(name)), thread_([this] { Loop(); }) {}

Strand::~Strand() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void Strand::Post(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(task));
  ++posted_;
}

void Strand::Drain() {
  absl::MutexLock lock(&mu_);
  const std::uint64_t target = posted_;
  auto caught_up = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ >= target; };
  mu_.Await(absl::Condition(&caught_up));
}

void Strand::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stop_ and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
    absl::MutexLock lock(&mu_);
    ++done_;
  }
}

}  // namespace sketchps
