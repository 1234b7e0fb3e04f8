#include "common/termination.h"

#include <signal.h>
#include <time.h>

#include <atomic>
#include <thread>

#include "absl/time/clock.h"

namespace sketchps {
namespace {

// Read by the signal handler, so lock-free.
std::atomic<int> g_writes{0};          // writes in progress (TerminationWaitsForThis)
std::atomic<bool> g_graceful{false};   // StopGracefullyOnTermination: a SIGTERM sets g_requested only
std::atomic<bool> g_requested{false};  // a SIGTERM arrived
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);

constexpr int kWriteWaitMs = 10000;

// Async-signal-safe: atomics, nanosleep, signal and raise only.
void WaitForWrites() {
  for (int i = 0; i < kWriteWaitMs && g_writes.load() > 0; ++i) {
    timespec ms{0, 1000000};
    nanosleep(&ms, nullptr);
  }
}

void OnTermination(int sig) {
  g_requested.store(true);
  if (g_graceful.load()) return;  // the process stops at its next safe point, or its watchdog ends it
  WaitForWrites();
  signal(sig, SIG_DFL);
  raise(sig);  // delivered once the handler returns: the process ends as the signal's default says
}

bool Install() {
  struct sigaction old {};
  if (sigaction(SIGTERM, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) return false;  // someone else's
  struct sigaction action {};
  action.sa_handler = OnTermination;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  return sigaction(SIGTERM, &action, nullptr) == 0;
}

}  // namespace

void WaitForWritesOnTermination() {
  static const bool installed = Install();
  (void)installed;
}

void StopGracefullyOnTermination(absl::Duration grace) {
  WaitForWritesOnTermination();
  if (g_graceful.exchange(true)) return;
  // The watchdog: a stop that has not happened `grace` after the signal happens anyway.
  std::thread([grace] {
    while (!g_requested.load()) absl::SleepFor(absl::Milliseconds(50));
    absl::SleepFor(grace);
    DieOfTermination();
  }).detach();
}

bool TerminationRequested() { return g_requested.load(); }

void DieOfTermination() {
  WaitForWrites();
  signal(SIGTERM, SIG_DFL);
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &term, nullptr);
  raise(SIGTERM);
  for (;;) pause();  // not reached: the default action ends the process
}

TerminationWaitsForThis::TerminationWaitsForThis() {
  // Blocked first: a SIGTERM handled on this thread while it counts as writing would wait for itself.
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, &old);
  was_blocked_ = sigismember(&old, SIGTERM) == 1;
  g_writes.fetch_add(1);
}

TerminationWaitsForThis::~TerminationWaitsForThis() {
  g_writes.fetch_sub(1);
  if (was_blocked_) return;
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &term, nullptr);
}

}  // namespace sketchps
