// Strand: a single-owner executor. Tasks posted to a strand run one at a time, in posting order, on
// the strand's own thread, so state touched only by those tasks needs no lock (each parameter-server
// shard reduces, applies and publishes its phases on one strand, off the phase table's lock).
//
//   Strand strand("shard 0");
//   strand.Post([&] { ... });   // returns at once
//   strand.Drain();             // waits until every task posted so far has run
//
// Post() and Drain() are thread-safe. A task must not call Drain() on its own strand (it would wait
// for itself). The destructor runs the tasks still queued, then joins the thread. Tasks must not
// throw.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace sketchps {

class Strand {
 public:
  explicit Strand(std::string name);
  ~Strand();
  Strand(const Strand&) = delete;
  Strand& operator=(const Strand&) = delete;

  void Post(std::function<void()> task);
  // Blocks until every task posted before this call has run.
  void Drain();
  // Whether the calling thread is this strand's thread.
  bool InStrand() const { return std::this_thread::get_id() == thread_.get_id(); }
  const std::string& name() const { return name_; }

 private:
  void Loop();

  const std::string name_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::uint64_t posted_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t done_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace sketchps
