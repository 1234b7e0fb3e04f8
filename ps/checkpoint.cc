#include "ps/checkpoint.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/reason.h"
#include "common/status.h"
#include "common/wire/framed_file.h"

namespace sketchps::ps {
namespace {

namespace fs = std::filesystem;
constexpr std::uint64_t kMaxPayloadBytes = std::uint64_t{1} << 34;  // 16 GiB: far above any shard

std::string Prefix(std::uint32_t shard) { return absl::StrFormat("shard-%u-round-", shard); }

// Checkpoint files of the shard, newest first.
std::vector<fs::path> ShardFiles(const std::string& dir, std::uint32_t shard) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(Prefix(shard), 0) == 0 && e.path().extension() == ".ckpt") files.push_back(e.path());
  }
  std::sort(files.rbegin(), files.rend());  // zero-padded round numbers sort lexically
  return files;
}

}  // namespace

std::string CheckpointFileName(std::uint32_t shard, std::uint64_t round) {
  return absl::StrFormat("shard-%u-round-%012u.ckpt", shard, round);
}

namespace {

// The shard and round a checkpoint file name stands for; nullopt for any other name.
std::optional<std::pair<std::uint32_t, std::uint64_t>> ParseFileName(const fs::path& path) {
  if (path.extension() != ".ckpt") return std::nullopt;
  std::uint32_t shard = 0;
  std::uint64_t round = 0;
  const std::string name = path.filename().string();
  if (std::sscanf(name.c_str(), "shard-%" SCNu32 "-round-%" SCNu64 ".ckpt", &shard, &round) != 2 ||
      name != CheckpointFileName(shard, round))
    return std::nullopt;
  return std::make_pair(shard, round);
}

}  // namespace

std::map<std::uint32_t, std::set<std::uint64_t>> CheckpointRounds(const std::string& dir) {
  std::map<std::uint32_t, std::set<std::uint64_t>> rounds;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (const auto parsed = ParseFileName(e.path())) rounds[parsed->first].insert(parsed->second);
  }
  return rounds;
}

absl::StatusOr<std::vector<std::string>> SetAsideCheckpointsAfter(const std::string& dir, std::uint32_t shard,
                                                                  std::uint64_t round, const std::string& aside) {
  std::vector<std::string> moved;
  for (const fs::path& file : ShardFiles(dir, shard)) {
    const auto parsed = ParseFileName(file);
    if (!parsed || parsed->second <= round) continue;
    std::error_code ec;
    fs::create_directories(aside, ec);
    const fs::path to = fs::path(aside) / file.filename();
    if (!ec) fs::rename(file, to, ec);
    if (ec)
      return absl::UnavailableError(absl::StrCat(file.string(), ": cannot move it to ", aside, ": ", ec.message()));
    moved.push_back(to.string());
  }
  return moved;
}

namespace {

absl::Status CheckContent(const v1::ShardCheckpoint& c) {
  if (c.range_hi() < c.range_lo()) return absl::DataLossError("range_hi < range_lo");
  const std::uint64_t n = c.range_hi() - c.range_lo();
  // Compared by division: n * 4 wraps for a hostile range.
  if (c.weights().size() % 4 != 0 || c.weights().size() / 4 != n) {
    return absl::DataLossError(absl::StrCat("weights hold ", c.weights().size(), " bytes, range needs ", n * 4));
  }
  // SGD's velocity holds one value per entry, Adam's moments two (the shard checks which).
  const std::uint64_t values = c.optimizer_state().size() / 4;
  if (!c.optimizer_state().empty() &&
      (c.optimizer_state().size() % 4 != 0 || (values != n && (n == 0 || values != 2 * n)))) {
    return absl::DataLossError(absl::StrCat("optimizer_state holds ", c.optimizer_state().size(),
                                            " bytes, range needs ", n * 4, " or ", n * 8));
  }
  return absl::OkStatus();
}

absl::Status Damaged(const std::string& message) {
  return WithReason(absl::DataLossError(message), Reason::kDamagedFile);
}

absl::StatusOr<v1::ShardCheckpoint> ParseCheckpointPayload(const std::string& payload, const std::string& name) {
  v1::ShardCheckpoint c;
  if (!c.ParseFromString(payload)) return Damaged(absl::StrCat(name, ": payload does not parse"));
  if (auto st = CheckContent(c); !st.ok()) return Damaged(absl::StrCat(name, ": ", st.message()));
  return c;
}

// The refusal of a damaged checkpoint (`why` names the file): the shard and the way out.
absl::Status RefuseDamaged(std::uint32_t shard_id, const absl::Status& why) {
  return WithReason(absl::DataLossError(absl::StrCat(
                        "shard ", shard_id, "'s newest checkpoint is damaged: ", why.message(),
                        " (not falling back to an older checkpoint silently: repair or remove the file, or set the "
                        "job key checkpoint.on_damaged: older to resume from the newest intact one)")),
                    Reason::kDamagedFile);
}

}  // namespace

absl::Status WriteCheckpoint(const std::string& dir, const v1::ShardCheckpoint& checkpoint, int keep,
                             const FileKey* key) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat(dir, ": cannot create the checkpoint directory: ", ec.message()));
  std::string payload;
  if (!checkpoint.SerializeToString(&payload)) return absl::InternalError("checkpoint does not serialize");
  const fs::path final_path = fs::path(dir) / CheckpointFileName(checkpoint.shard_id(), checkpoint.rounds_applied());
  SKETCHPS_RETURN_IF_ERROR(
      WriteFramedFile(final_path.string(), kCheckpointMagic, payload, Durability::kSurvivesPowerLoss, key));
  const auto files = ShardFiles(dir, checkpoint.shard_id());
  for (std::size_t i = static_cast<std::size_t>(std::max(keep, 1)); i < files.size(); ++i) fs::remove(files[i], ec);
  return absl::OkStatus();
}

absl::StatusOr<v1::ShardCheckpoint> ReadCheckpointFile(const std::string& path, const FileKey* key) {
  SKETCHPS_ASSIGN_OR_RETURN(const std::string payload, ReadFramedFile(path, kCheckpointMagic, kMaxPayloadBytes, key));
  return ParseCheckpointPayload(payload, path);
}

absl::StatusOr<v1::ShardCheckpoint> ParseCheckpointBytes(std::string bytes, const std::string& name,
                                                         const FileKey* key) {
  SKETCHPS_ASSIGN_OR_RETURN(const std::string payload,
                            UnframeBytes(std::move(bytes), kCheckpointMagic, kMaxPayloadBytes, name, key));
  return ParseCheckpointPayload(payload, name);
}

absl::StatusOr<LoadedCheckpoint> LoadLatest(const std::string& dir, const std::string& job_id, std::uint32_t shard_id,
                                            const FileKey* key, bool older_if_damaged) {
  LoadedCheckpoint out;
  for (const auto& file : ShardFiles(dir, shard_id)) {
    auto c = ReadCheckpointFile(file.string(), key);
    if (!c.ok() && IsKeyError(c.status())) return c.status();  // tampered, or the key is missing or wrong
    if (!c.ok() && IsDamagedFile(c.status()) && !older_if_damaged) return RefuseDamaged(shard_id, c.status());
    if (c.ok() && (c->job_id() != job_id || c->shard_id() != shard_id)) {
      c = absl::FailedPreconditionError(
          absl::StrCat(file.string(), ": belongs to job '", c->job_id(), "' shard ", c->shard_id()));
    }
    if (!c.ok()) {
      out.skipped.push_back(std::string(c.status().message()));
      continue;
    }
    out.checkpoint = std::move(*c);
    out.path = file.string();
    return out;
  }
  return absl::NotFoundError(
      absl::StrCat(dir, ": no valid checkpoint of job '", job_id, "' shard ", shard_id,
                   out.skipped.empty() ? "" : absl::StrCat(" (", out.skipped.size(), " invalid files skipped)")));
}

}  // namespace sketchps::ps
