// Durable shard checkpoints.
//
// File format: "SKPSCKP1" (8 bytes) | payload length (u64 LE) | CRC32 of the payload (u32 LE) |
// payload (a serialized sketchps.v1.ShardCheckpoint). Files are named
// shard-<shard>-round-<rounds_applied, 12 digits>.ckpt in the checkpoint directory. With a
// checkpoint key (`key`, the server's --checkpoint-key-file) the files are tagged instead:
// "SKPKCKP1" | length | CRC32 | payload | HMAC-SHA256 (common/wire/framed_file.h), and every read
// here needs the key and refuses untagged files (docs/security.md "Checkpoint integrity").
//
// Write is atomic: the bytes go to a temporary file, which is fsynced, renamed over the final name,
// and the directory is fsynced; a crash leaves either the old or the new file, never a torn one that
// validates, and a failed write (a full disk) removes the temporary file and names it. The newest `keep` files are
// kept, older ones removed: three by default, so that a round every shard holds survives shards that stopped a round or
// two apart (tools/previous_run.h).
//
// LoadLatest returns the newest checkpoint of the shard that passes validation (magic, length, CRC,
// parse, job, shard and sizes). Files of another job or shard are skipped and reported in `skipped`.
// A damaged file (IsDamagedFile: bad magic, truncated, CRC mismatch, does not parse: Write never
// leaves one behind, so it was damaged on disk) is refused with DataLoss naming the shard and the
// file, unless `older_if_damaged` (the job key checkpoint.on_damaged: older), which skips it too.
// NotFound when the directory holds no valid checkpoint of the shard. A file refused for its
// integrity tag (IsKeyError: a wrong tag, no tag under a key, a tag without a key) is never skipped:
// LoadLatest returns that error, naming the file, so that a tampered file or a missing or wrong key
// stops the shard instead of sending it back to an older file or to a fresh start.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sketchps/v1/checkpoint.pb.h"

namespace sketchps {
class FileKey;
}

namespace sketchps::ps {

inline constexpr char kCheckpointMagic[8] = {'S', 'K', 'P', 'S', 'C', 'K', 'P', '1'};

// `key`: null writes untagged files; else every function here that reads takes the same key.
absl::Status WriteCheckpoint(const std::string& dir, const v1::ShardCheckpoint& checkpoint, int keep = 3,
                             const FileKey* key = nullptr);

struct LoadedCheckpoint {
  v1::ShardCheckpoint checkpoint;
  std::string path;
  std::vector<std::string> skipped;  // "<path>: <why>" for newer files of another job or shard, or damaged ones
};

absl::StatusOr<LoadedCheckpoint> LoadLatest(const std::string& dir, const std::string& job_id, std::uint32_t shard_id,
                                            const FileKey* key = nullptr, bool older_if_damaged = false);

// "shard-<shard>-round-<round, 12 digits>.ckpt".
std::string CheckpointFileName(std::uint32_t shard, std::uint64_t round);

// The rounds of each shard's checkpoint files in `dir` (shard -> rounds), from the file names alone
// (the files are not read, so not validated). Empty when the directory is missing or holds none.
std::map<std::uint32_t, std::set<std::uint64_t>> CheckpointRounds(const std::string& dir);

// Moves the shard's checkpoint files of rounds after `round` from `dir` into `aside` (created), so
// that LoadLatest finds `round`; returns the moved files' new paths. The error names the file.
absl::StatusOr<std::vector<std::string>> SetAsideCheckpointsAfter(const std::string& dir, std::uint32_t shard,
                                                                  std::uint64_t round, const std::string& aside);

// Validates one file's framing and content; the error names the file and the problem.
absl::StatusOr<v1::ShardCheckpoint> ReadCheckpointFile(const std::string& path, const FileKey* key = nullptr);
// The same checks on a file's bytes in memory (`name` stands for the path in errors).
absl::StatusOr<v1::ShardCheckpoint> ParseCheckpointBytes(std::string bytes, const std::string& name,
                                                         const FileKey* key = nullptr);

}  // namespace sketchps::ps
