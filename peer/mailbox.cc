#include "peer/mailbox.h"

#include <algorithm>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/reason.h"

namespace sketchps::peer {
namespace {

constexpr char kAbortPayloadUrl[] = "sketchps.peer/abort";

struct Wanted {
  const std::map<std::pair<std::pair<std::uint64_t, std::uint32_t>, std::uint32_t>, Letter>* letters;
  const std::map<std::pair<std::uint64_t, std::uint32_t>, absl::Status>* aborts;
  std::pair<std::pair<std::uint64_t, std::uint32_t>, std::uint32_t> key;
};

bool Arrived(Wanted* w) { return w->aborts->count(w->key.first) > 0 || w->letters->count(w->key) > 0; }

}  // namespace

bool IsPeerAbort(const absl::Status& status) { return status.GetPayload(kAbortPayloadUrl).has_value(); }

absl::Status PeerAbortStatus(absl::StatusCode code, std::string message) {
  if (code == absl::StatusCode::kOk) code = absl::StatusCode::kUnavailable;
  absl::Status s(code, message);
  s.SetPayload(kAbortPayloadUrl, absl::Cord("1"));
  return s;
}

Mailbox::Mailbox(std::uint32_t num_shards, std::size_t max_letters) : max_letters_(max_letters), boxes_(num_shards) {}

bool Mailbox::Stale(const Box& box, std::pair<std::uint64_t, std::uint32_t> phase, std::uint32_t step) const {
  if (!box.begun) return false;
  if (phase < box.current) return true;
  return phase == box.current && std::find(box.taken.begin(), box.taken.end(), step) != box.taken.end();
}

absl::Status Mailbox::Put(const PhaseRef& ref, std::uint32_t step, Letter letter, std::size_t sender_cap) {
  absl::MutexLock lock(&mu_);
  Box& box = boxes_.at(ref.shard);
  const auto phase = std::make_pair(ref.round, ref.phase);
  if (Stale(box, phase, step) || box.letters.count({phase, step}) > 0) return absl::OkStatus();
  if (TooFarAhead(box, ref.round)) {
    return absl::UnavailableError(absl::StrCat("header.round: ", ref.round,
                                               " is more than one round ahead of this rank's ", box.current.first,
                                               "; retry later"));
  }
  if (box.letters.size() >= max_letters_) {
    return WithReason(absl::ResourceExhaustedError(
                          absl::StrCat("mailbox of shard ", ref.shard, " is full (", max_letters_, " letters); retry")),
                      Reason::kBusy);
  }
  const auto held = std::count_if(box.letters.begin(), box.letters.end(),
                                  [&](const auto& kv) { return kv.second.sender == letter.sender; });
  if (static_cast<std::size_t>(held) >= sender_cap) {
    return WithReason(absl::ResourceExhaustedError(absl::StrCat("mailbox of shard ", ref.shard, ": rank ",
                                                                letter.sender, " already holds ", held,
                                                                " letters (at most ", sender_cap, "); retry")),
                      Reason::kBusy);
  }
  box.letters.emplace(StepKey{phase, step}, std::move(letter));
  return absl::OkStatus();
}

bool Mailbox::Abort(const PhaseRef& ref, absl::Status why) {
  absl::MutexLock lock(&mu_);
  Box& box = boxes_.at(ref.shard);
  const auto phase = std::make_pair(ref.round, ref.phase);
  if (box.begun && phase < box.current) return false;
  if (TooFarAhead(box, ref.round)) return false;
  if (box.aborts.size() >= max_letters_) return false;  // bounded; a flood of notices is dropped
  box.aborts.emplace(phase, std::move(why));
  return true;
}

void Mailbox::Begin(const PhaseRef& ref) {
  absl::MutexLock lock(&mu_);
  Box& box = boxes_.at(ref.shard);
  const auto phase = std::make_pair(ref.round, ref.phase);
  if (!box.begun || phase != box.current) box.taken.clear();
  box.current = phase;
  box.begun = true;
  std::erase_if(box.letters, [&](const auto& kv) { return kv.first.first < phase; });
  std::erase_if(box.aborts, [&](const auto& kv) { return kv.first < phase; });
}

absl::StatusOr<Letter> Mailbox::Take(const PhaseRef& ref, std::uint32_t step, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  Box& box = boxes_.at(ref.shard);
  const auto phase = std::make_pair(ref.round, ref.phase);
  const StepKey key{phase, step};
  Wanted wanted{&box.letters, &box.aborts, key};
  mu_.AwaitWithDeadline(absl::Condition(&Arrived, &wanted), deadline);
  if (auto a = box.aborts.find(phase); a != box.aborts.end()) return a->second;
  auto it = box.letters.find(key);
  if (it == box.letters.end()) return absl::DeadlineExceededError("no letter");
  Letter letter = std::move(it->second);
  box.letters.erase(it);
  if (phase == box.current) box.taken.push_back(step);
  if (!letter.rejected.ok()) return letter.rejected;
  return letter;
}

std::size_t Mailbox::HeldLetters(std::uint32_t shard) const {
  absl::MutexLock lock(&mu_);
  return boxes_.at(shard).letters.size();
}

}  // namespace sketchps::peer
