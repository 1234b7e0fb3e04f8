#include "common/reason.h"

#include <optional>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"

namespace sketchps {
namespace {

// The payload's type URL; its value is the reason's number in decimal.
constexpr char kReasonUrl[] = "type.sketchps.dev/sketchps.Reason";

constexpr char kCulpritUrl[] = "type.sketchps.dev/sketchps.Culprit";

constexpr Reason kLastReason = Reason::kDamagedFile;

}  // namespace

const char* ReasonName(Reason reason) {
  switch (reason) {
    case Reason::kNone: return "none";
    case Reason::kRejoin: return "rejoin";
    case Reason::kReplayRound: return "replay_round";
    case Reason::kRoundApplied: return "round_applied";
    case Reason::kRoundAhead: return "round_ahead";
    case Reason::kStaleRound: return "stale_round";
    case Reason::kSuperseded: return "superseded";
    case Reason::kShuttingDown: return "shutting_down";
    case Reason::kFingerprintMismatch: return "fingerprint_mismatch";
    case Reason::kModelMismatch: return "model_mismatch";
    case Reason::kReplicaDiverged: return "replica_diverged";
    case Reason::kBusy: return "busy";
    case Reason::kTooLarge: return "too_large";
    case Reason::kRefused: return "refused";
    case Reason::kMisbehaved: return "misbehaved";
    case Reason::kEvicted: return "evicted";
    case Reason::kCheckpointKey: return "checkpoint_key";
    case Reason::kNotMember: return "not_member";
    case Reason::kDamagedFile: return "damaged_file";
  }
  return "none";
}

Reason ReasonFromNumber(std::uint32_t number) {
  return number <= static_cast<std::uint32_t>(kLastReason) ? static_cast<Reason>(number) : Reason::kNone;
}

absl::Status WithReason(absl::Status status, Reason reason) {
  if (status.ok()) return status;
  if (reason == Reason::kNone) {
    status.ErasePayload(kReasonUrl);
    return status;
  }
  status.SetPayload(kReasonUrl, absl::Cord(std::to_string(static_cast<std::uint32_t>(reason))));
  return status;
}

Reason ReasonOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kReasonUrl);
  std::uint32_t number = 0;
  if (!payload || !absl::SimpleAtoi(std::string(*payload), &number)) return Reason::kNone;
  return ReasonFromNumber(number);
}

bool IsTransient(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded: return true;
    default: return HasReason(status, Reason::kBusy);
  }
}

bool IsConfigurationError(const absl::Status& status) {
  if (IsFingerprintMismatch(status) || IsModelMismatch(status)) return true;
  return status.code() == absl::StatusCode::kInvalidArgument && !HasReason(status, Reason::kRefused) &&
         !IsMisbehaved(status) && !IsEvicted(status);
}

absl::Status WithCulprit(absl::Status status, std::uint32_t rank) {
  if (!status.ok()) status.SetPayload(kCulpritUrl, absl::Cord(std::to_string(rank)));
  return status;
}

std::optional<std::uint32_t> CulpritOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kCulpritUrl);
  std::uint32_t rank = 0;
  if (!payload || !absl::SimpleAtoi(std::string(*payload), &rank)) return std::nullopt;
  return rank;
}

}  // namespace sketchps
