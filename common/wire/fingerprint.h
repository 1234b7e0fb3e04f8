// Job fingerprints: a hash per semantic key of the job spec (job/job_spec.h JobFingerprint), which
// servers compare at Join and peers at connect, so that two processes started with different job
// files fail at once with the keys that differ instead of training on different settings (and
// being reported as a "replica diverged" later).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/map.h"

namespace sketchps {

using Fingerprint = std::map<std::string, std::uint64_t>;

// The key under which a decentralized worker records its kernel backend (0: CPU, 1: CUDA;
// kernels::Backend), so that peers on different backends refuse to train together.
inline constexpr const char* kKernelsKey = "kernels";

// The keys whose hashes differ or that only one side has, sorted.
std::vector<std::string> DiffKeys(const Fingerprint& a, const Fingerprint& b);

// OK when `theirs` equals `mine` (or `theirs` is empty: a client that sends none, e.g. a tool);
// FailedPrecondition "job fingerprint: <who>'s job differs from this one's in optimizer, scheme"
// with Reason::kFingerprintMismatch; when kKernelsKey differs, a message naming both backends
// (kFingerprintMismatch); when only "initial_weights" differs, a message about the model's initial
// weights with Reason::kModelMismatch (common/reason.h).
absl::Status CheckFingerprint(const Fingerprint& mine, const Fingerprint& theirs, const std::string& who);

Fingerprint FingerprintFromProto(const google::protobuf::Map<std::string, std::uint64_t>& in);
void FingerprintToProto(const Fingerprint& in, google::protobuf::Map<std::string, std::uint64_t>* out);

}  // namespace sketchps
