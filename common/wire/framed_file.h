// Framed files: an 8-byte magic | payload length (u64 LE) | CRC32 of the payload (u32 LE) | payload.
// Shard checkpoints ("SKPSCKP1", ps/checkpoint.h) and gradient dumps ("SKPSGRD1",
// common/wire/gradient_dump.h) use it.
//
// WriteFramedFile is atomic (common/file_write.h WriteFileAtomically, mode 0600): the bytes go to
// "<path>.tmp", which is fsynced, renamed over `path`, and the directory is fsynced; a crash leaves the
// old file or the new one, never a torn one that validates, and a failed write (a full disk) removes
// the temporary file and names it. With Durability::kSurvivesProcessKill the two fsyncs are left out:
// the rename is still atomic, so a killed process leaves a whole file, but a power loss may lose the
// newest one (for state rewritten every round, where an fsync per round would cost more than the file
// is worth). ReadFramedFile checks
// the magic, the length (at most max_payload bytes, and exactly the file's size) and the CRC before returning the
// payload; errors name the file and the problem (NotFound when it cannot be opened, DataLoss for anything else).
// UnframeBytes does the same checks on a file's bytes already in memory (`name` stands for the path in its errors).
//
// Keyed integrity tags (docs/security.md "Checkpoint integrity"). Given a FileKey
// (common/wire/file_key.h), the writer frames the file as
//   tagged magic (8 bytes) | payload length (u64 LE) | CRC32 of the payload (u32 LE) | payload |
//   HMAC-SHA256 under the key of every byte before it (32 bytes)
// where the tagged magic is the magic with its fourth byte replaced by 'K' ("SKPSCKP1" becomes
// "SKPKCKP1"), so a tagged file is told from an untagged one by its first bytes, and a reader that
// knows nothing of tags refuses it as a file of another kind. Without a key the format is the one
// above, byte for byte: files written before tags existed still load. The reader checks, in order:
// the magic, the length, the CRC (an accident: DataLoss with Reason::kDamagedFile, IsDamagedFile), then
// the tag (compared in constant time):
//   - key given, tagged file, wrong tag: DataLoss "<file>: integrity tag does not match the
//     checkpoint key (tampered, or written with another key)";
//   - key given, untagged file: DataLoss "<file>: has no integrity tag ...": under a key, an untagged
//     file is indistinguishable from one planted by someone without the key;
//   - no key, tagged file: FailedPrecondition "<file>: written with a checkpoint key ... pass
//     --checkpoint-key-file ...".
// IsKeyError tells these three from the other refusals (a torn or corrupt file), for callers that
// skip a damaged file but must not skip past a key problem (ps/checkpoint.h LoadLatest).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/file_write.h"

namespace sketchps {

class FileKey;

// The framed bytes of `payload` (what WriteFramedFile writes without a key): the untagged format.
std::string FrameBytes(const char (&magic)[8], const std::string& payload);
// The tagged framing of `payload` under `key` (what WriteFramedFile writes with one).
std::string FrameTaggedBytes(const char (&magic)[8], const std::string& payload, const FileKey& key);
// `key`: null writes the untagged format, else the tagged one.
absl::Status WriteFramedFile(const std::string& path, const char (&magic)[8], const std::string& payload,
                             Durability durability = Durability::kSurvivesPowerLoss, const FileKey* key = nullptr);
// `key`: null accepts untagged files only; else tagged files whose tag matches only.
absl::StatusOr<std::string> ReadFramedFile(const std::string& path, const char (&magic)[8], std::uint64_t max_payload,
                                           const FileKey* key = nullptr);
absl::StatusOr<std::string> UnframeBytes(std::string bytes, const char (&magic)[8], std::uint64_t max_payload,
                                         const std::string& name, const FileKey* key = nullptr);
// Whether a Read/Unframe refusal is about the integrity tag (missing, wrong, or needing a key).
bool IsKeyError(const absl::Status& status);

}  // namespace sketchps
