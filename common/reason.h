// Reasons: why a status was returned, as a code that programs act upon.
//
// A status's message is for people; what a receiver does about an error (join again, replay a
// round, give up with exit 2, retry later) depends only on its code and its Reason, never on the
// message's words. A Reason travels with an absl::Status as a payload, survives Annotate()
// (common/status.h) and crosses gRPC in the status details (common/net/grpc_edge.h), so a receiver in
// another process sees the same Reason the sender attached.
//
//   return WithReason(absl::FailedPreconditionError("... assembling ..."), Reason::kRejoin);
//   if (IsRejoin(status)) { ... join again ... }
//
// The numbers are part of the wire protocol (sketchps.v1.ErrorDetail): never renumber; add at the
// end. A number this build does not know reads as Reason::kNone.
// Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/status.h"

namespace sketchps {

enum class Reason : std::uint32_t {
  kNone = 0,
  // Parameter-server protocol (docs/protocol.md).
  kRejoin = 1,        // the shard is assembling its state: join again offering the replica, then retry
  kReplayRound = 2,   // the shard lost the round's earlier phases (a restart): replay from phase 0
  kRoundApplied = 3,  // a new phase of a round the shard already applied (applied rounds are immutable)
  kRoundAhead = 4,    // a phase of a round beyond the next one the shard applies
  kStaleRound = 5,    // a round older than the shard's retention window
  kSuperseded = 6,    // a newer call of the same worker replaced this one (a Join sent again)
  kShuttingDown = 7,  // the process is stopping; another attempt may reach its successor
  // The job and the model.
  kFingerprintMismatch = 8,  // the job differs between processes (the message names the keys)
  kModelMismatch = 9,        // a model's layout or initial weights differ from the job's or the others'
  kReplicaDiverged = 10,     // a worker's replica differs from the master copy after a round
  // Flow control.
  kBusy = 11,  // a bounded queue is full: the same request may succeed later
  // Limits that an identical retry would hit again.
  kTooLarge = 12,  // a message or table larger than the receiver accepts
  // Set by the gRPC edge on an INVALID_ARGUMENT that another process returned without a Reason: it
  // refused what this process sent (the message names the field). Not a configuration error here.
  kRefused = 13,
  // Decentralized mode (docs/protocol.md "Eviction"): a peer sent a letter that failed validation
  // (malformed, wrong shape, non-finite); the receivers evict it and regroup without it.
  kMisbehaved = 14,
  kEvicted = 15,  // this worker was evicted by its peers (its letter was refused): it stops
  // Local files: a checkpoint or state file refused for its integrity tag (a wrong tag, no tag under
  // a key, a tag without a key: common/wire/framed_file.h IsKeyError); the caller must not fall back.
  kCheckpointKey = 16,
  // Elastic membership (job key ps.elastic, docs/protocol.md "Elastic membership"): a push from a
  // worker that is not a member of the round (it has not joined yet, or it left before the round).
  kNotMember = 17,
  // Local files: a checkpoint or state file that fails its framing (magic, length, CRC) or does not
  // parse: damaged on disk. A loader refuses it, naming the file, unless asked to fall back to an
  // older file (job key checkpoint.on_damaged: older).
  kDamagedFile = 18,
};

// "rejoin", "replay_round", ... ("none" for kNone and numbers this build does not know).
const char* ReasonName(Reason reason);
// The Reason of a wire number: kNone for numbers this build does not know.
Reason ReasonFromNumber(std::uint32_t number);

// `status` with `reason` attached (replacing any earlier one); OK statuses are returned unchanged.
absl::Status WithReason(absl::Status status, Reason reason);
// The Reason attached to `status`, kNone when there is none.
Reason ReasonOf(const absl::Status& status);

// Predicates, leveldb-style. Each reads the status's code and Reason only.
inline bool HasReason(const absl::Status& s, Reason r) { return !s.ok() && ReasonOf(s) == r; }
inline bool IsRejoin(const absl::Status& s) { return HasReason(s, Reason::kRejoin); }
inline bool IsReplayRound(const absl::Status& s) { return HasReason(s, Reason::kReplayRound); }
inline bool IsRoundApplied(const absl::Status& s) { return HasReason(s, Reason::kRoundApplied); }
inline bool IsStaleRound(const absl::Status& s) { return HasReason(s, Reason::kStaleRound); }
inline bool IsRoundAhead(const absl::Status& s) { return HasReason(s, Reason::kRoundAhead); }
inline bool IsSuperseded(const absl::Status& s) { return HasReason(s, Reason::kSuperseded); }
inline bool IsFingerprintMismatch(const absl::Status& s) { return HasReason(s, Reason::kFingerprintMismatch); }
inline bool IsModelMismatch(const absl::Status& s) { return HasReason(s, Reason::kModelMismatch); }
inline bool IsReplicaDivergence(const absl::Status& s) { return HasReason(s, Reason::kReplicaDiverged); }
inline bool IsTooLarge(const absl::Status& s) { return HasReason(s, Reason::kTooLarge); }
inline bool IsMisbehaved(const absl::Status& s) { return HasReason(s, Reason::kMisbehaved); }
inline bool IsEvicted(const absl::Status& s) { return HasReason(s, Reason::kEvicted); }
inline bool IsNotMember(const absl::Status& s) { return HasReason(s, Reason::kNotMember); }
inline bool IsDamagedFile(const absl::Status& s) { return HasReason(s, Reason::kDamagedFile); }

// Whether another attempt of the same call may succeed: UNAVAILABLE and DEADLINE_EXCEEDED, and a
// full queue (Reason::kBusy). gRPC's own RESOURCE_EXHAUSTED refusals carry no Reason (a message
// over the size limit, an exhausted quota) and are not transient: the same call is refused again.
bool IsTransient(const absl::Status& status);

// Whether the status says this process was started with a configuration it cannot run: an
// INVALID_ARGUMENT of its own (not one another process returned: Reason::kRefused), or a job or
// model that differs from the others'. Such errors are permanent (the daemons exit 2, a Kubernetes
// Job does not retry them).
bool IsConfigurationError(const absl::Status& status);

// The rank a kMisbehaved status blames (in the membership epoch it happened in), carried in the
// status's payload like the Reason; nullopt when there is none.
absl::Status WithCulprit(absl::Status status, std::uint32_t rank);
std::optional<std::uint32_t> CulpritOf(const absl::Status& status);

}  // namespace sketchps
