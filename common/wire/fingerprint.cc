#include "common/wire/fingerprint.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/reason.h"

namespace sketchps {

std::vector<std::string> DiffKeys(const Fingerprint& a, const Fingerprint& b) {
  std::vector<std::string> keys;
  for (const auto& [key, hash] : a) {
    auto it = b.find(key);
    if (it == b.end() || it->second != hash) keys.push_back(key);
  }
  for (const auto& [key, hash] : b) {
    if (!a.contains(key)) keys.push_back(key);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

absl::Status CheckFingerprint(const Fingerprint& mine, const Fingerprint& theirs, const std::string& who) {
  if (theirs.empty()) return absl::OkStatus();
  const auto keys = DiffKeys(mine, theirs);
  if (keys.empty()) return absl::OkStatus();
  // Decentralized peers on different kernel backends (session/session.cc adds "kernels": 0 CPU, 1 CUDA).
  if (std::find(keys.begin(), keys.end(), std::string(kKernelsKey)) != keys.end()) {
    const auto name = [](const Fingerprint& f) {
      const auto it = f.find(kKernelsKey);
      return it == f.end() ? "unknown" : it->second == 0 ? "cpu" : it->second == 1 ? "cuda" : "unknown";
    };
    return WithReason(
        absl::FailedPreconditionError(absl::StrCat(
            "kernels: ", who, " runs on the ", name(theirs), " kernels and this process on the ", name(mine),
            " ones; decentralized peers must share one backend (docs/gpu.md: nothing compares their "
            "replicas after each round, so a difference in rounding would go unnoticed)")),
        Reason::kFingerprintMismatch);
  }
  // Different initial weights with the same job: the model was built differently (or before the seed).
  if (keys == std::vector<std::string>{"initial_weights"}) {
    return WithReason(absl::FailedPreconditionError(absl::StrCat(
                          "initial weights: ", who,
                          "'s model starts from other weights than this one's with the same "
                          "job (build the model after sketchps.torch.init(), which seeds torch, the same way on every "
                          "rank)")),
                      Reason::kModelMismatch);
  }
  return WithReason(
      absl::FailedPreconditionError(absl::StrCat("job fingerprint: ", who, "'s job differs from this one's in ",
                                                 absl::StrJoin(keys, ", "), " (the same job file everywhere?)")),
      Reason::kFingerprintMismatch);
}

Fingerprint FingerprintFromProto(const google::protobuf::Map<std::string, std::uint64_t>& in) {
  Fingerprint out;
  for (const auto& [key, hash] : in) out[key] = hash;
  return out;
}

void FingerprintToProto(const Fingerprint& in, google::protobuf::Map<std::string, std::uint64_t>* out) {
  out->clear();
  for (const auto& [key, hash] : in) (*out)[key] = hash;
}

}  // namespace sketchps
