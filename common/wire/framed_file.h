// Framed files: an 8-byte magic | payload length (u64 LE) | CRC32 of the payload (u32 LE) | payload.
// Shard checkpoints ("SKPSCKP1", ps/checkpoint.h) and gradient dumps ("SKPSGRD1",
// common/wire/gradient_dump.h) use it.
//
// WriteFramedFile is atomic: the bytes go to "<path>.tmp", which is fsynced, renamed over `path`, and
// the directory is fsynced; a crash leaves the old file or the new one, never a torn one that
// validates. With Durability::kSurvivesProcessKill the two fsyncs are left out: the rename is still
// atomic, so a killed process leaves a whole file, but a power loss may lose the newest one (for
// state rewritten every round, where an fsync per round would cost more than the file is worth). ReadFramedFile checks
// the magic, the length (at most max_payload bytes, and exactly the file's size) and the CRC before returning the
// payload; errors name the file and the problem (NotFound when it cannot be opened, DataLoss for anything else).
// UnframeBytes does the same checks on a file's bytes already in memory (`name` stands for the path in its errors).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace sketchps {

// The framed bytes of `payload` (what WriteFramedFile writes).
std::string FrameBytes(const char (&magic)[8], const std::string& payload);
enum class Durability { kSurvivesPowerLoss, kSurvivesProcessKill };
absl::Status WriteFramedFile(const std::string& path, const char (&magic)[8], const std::string& payload,
                             Durability durability = Durability::kSurvivesPowerLoss);
absl::StatusOr<std::string> ReadFramedFile(const std::string& path, const char (&magic)[8], std::uint64_t max_payload);
absl::StatusOr<std::string> UnframeBytes(std::string bytes, const char (&magic)[8], std::uint64_t max_payload,
                                         const std::string& name);

}  // namespace sketchps
