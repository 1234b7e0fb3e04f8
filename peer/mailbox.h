// Mailbox: the received steps of peer collectives, waiting for the local rank to take them.
//
// Keys are (shard, round, phase) plus the step; the schedule fixes the one sender of each step, so a
// step holds at most one letter. Rules (each an absl::Status, never a crash):
//   - Put of a step already held, already taken, or of a phase older than the one the local rank is
//     in (Begin) is acknowledged and dropped: retries are idempotent;
//   - at most `max_letters` letters per shard are held; a Put beyond that is ResourceExhausted (the
//     sender retries). A peer can be at most one phase ahead (every collective needs every rank's
//     contribution), so 2 * NumSteps letters per shard is enough;
//   - one sender holds at most `sender_cap` letters of a shard (ResourceExhausted beyond), so one
//     peer cannot fill the mailbox and starve the others;
//   - once the local rank has begun a phase, letters and abort notices of a round more than one
//     round ahead of it are refused (Unavailable, not stored): no peer can be that far ahead, and
//     such letters would otherwise sit in the mailbox until that round;
//   - a letter may carry a rejection (the payload failed validation): Take returns that error, so
//     the local phase fails at once instead of waiting for a message it refused;
//   - Abort(key) marks a phase abandoned by a peer: a Take on it returns that status (IsPeerAbort).
// Take waits until the letter is there, the phase is aborted or the deadline passes
// (DeadlineExceeded). Thread-safe; phases of different shards proceed independently.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "peer/partial.h"

namespace sketchps::peer {

struct PhaseRef {
  std::uint32_t shard = 0;
  std::uint64_t round = 0;
  std::uint32_t phase = 0;
  friend auto operator<=>(const PhaseRef&, const PhaseRef&) = default;
};

struct Letter {
  std::uint32_t sender = 0;
  PhaseSpec spec;
  Partial partial;
  std::uint64_t wire_bytes = 0;  // the serialized request
  absl::Status rejected;         // not OK: the receiver refused the payload
};

// Whether `status` is a peer's abort notice (as opposed to an error this rank detected itself).
bool IsPeerAbort(const absl::Status& status);
absl::Status PeerAbortStatus(absl::StatusCode code, std::string message);

class Mailbox {
 public:
  Mailbox(std::uint32_t num_shards, std::size_t max_letters);

  absl::Status Put(const PhaseRef& ref, std::uint32_t step, Letter letter, std::size_t sender_cap);
  // Dropped (returns false) when it is out of the round window or the notices are at their bound.
  bool Abort(const PhaseRef& ref, absl::Status why);
  // The local rank enters `ref`: letters and aborts of older phases of that shard are dropped.
  void Begin(const PhaseRef& ref);
  absl::StatusOr<Letter> Take(const PhaseRef& ref, std::uint32_t step, absl::Time deadline);

  std::size_t HeldLetters(std::uint32_t shard) const;

 private:
  using StepKey = std::pair<std::pair<std::uint64_t, std::uint32_t>, std::uint32_t>;  // ((round, phase), step)
  struct Box {
    std::pair<std::uint64_t, std::uint32_t> current{0, 0};
    bool begun = false;
    std::vector<std::uint32_t> taken;  // steps of `current` already taken
    std::map<StepKey, Letter> letters;
    std::map<std::pair<std::uint64_t, std::uint32_t>, absl::Status> aborts;
  };

  bool Stale(const Box& box, std::pair<std::uint64_t, std::uint32_t> phase, std::uint32_t step) const;
  static bool TooFarAhead(const Box& box, std::uint64_t round) { return box.begun && round > box.current.first + 1; }

  const std::size_t max_letters_;
  mutable absl::Mutex mu_;
  std::vector<Box> boxes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sketchps::peer
