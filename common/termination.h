// What SIGTERM does to a process that writes files or trains rounds (the worker daemon), so that a
// stop never leaves a file half written or a round half pushed.
//
//   WaitForWritesOnTermination()        installs (once per process) a SIGTERM handler under which the
//                                       writes in progress (TerminationWaitsForThis: every writer of
//                                       common/file_write.h holds one) finish first, up to 10 s; then
//                                       the process dies of the signal as it would have without the
//                                       handler (exit status 128 + 15).
//   StopGracefullyOnTermination(grace)  the same handler, but a SIGTERM only sets a flag
//                                       (TerminationRequested) that the caller acts on at its next
//                                       safe point, e.g. between two rounds; if the process is still
//                                       alive `grace` later, it dies as above.
//   DieOfTermination()                  waits for the writes in progress, then dies of SIGTERM.
// A process that blocks SIGTERM itself (the launchers and shards that poll for it) never runs the
// handler; a handler someone else installed is left alone. Thread-safe.
#pragma once

#include "absl/time/time.h"

namespace sketchps {

void WaitForWritesOnTermination();
void StopGracefullyOnTermination(absl::Duration grace);
bool TerminationRequested();
[[noreturn]] void DieOfTermination();

// While it lives, this thread's SIGTERM is blocked and a SIGTERM handled by another thread waits for
// it (WaitForWritesOnTermination).
class TerminationWaitsForThis {
 public:
  TerminationWaitsForThis();
  ~TerminationWaitsForThis();
  TerminationWaitsForThis(const TerminationWaitsForThis&) = delete;
  TerminationWaitsForThis& operator=(const TerminationWaitsForThis&) = delete;

 private:
  bool was_blocked_ = false;
};

}  // namespace sketchps
