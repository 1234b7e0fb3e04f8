#include "server/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace sketchps::server {
namespace {

namespace fs = std::filesystem;
constexpr char kMagic[8] = {'S', 'K', 'P', 'S', 'C', 'K', 'P', '1'};
constexpr std::size_t kHeaderBytes = 8 + 8 + 4;
constexpr std::uint64_t kMaxPayloadBytes = std::uint64_t{1} << 34;  // 16 GiB: far above any shard

std::string FileName(std::uint32_t shard, std::uint64_t round) {
  return absl::StrFormat("shard-%u-round-%012u.ckpt", shard, round);
}

std::string Prefix(std::uint32_t shard) { return absl::StrFormat("shard-%u-round-", shard); }

void PutLe(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

std::uint64_t GetLe(const std::string& in, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint64_t{static_cast<unsigned char>(in[at + i])} << (8 * i);
  return v;
}

std::uint32_t Crc(const std::string& data) {
  return static_cast<std::uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
}

absl::Status WriteAllAndSync(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return absl::UnavailableError(absl::StrCat(path, ": cannot create: ", std::strerror(errno)));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return absl::UnavailableError(absl::StrCat(path, ": write failed: ", why));
    }
    done += static_cast<std::size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const std::string why = synced ? "" : std::strerror(errno);
  ::close(fd);
  if (!synced) return absl::UnavailableError(absl::StrCat(path, ": fsync failed: ", why));
  return absl::OkStatus();
}

void SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

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

absl::Status CheckContent(const v1::ShardCheckpoint& c) {
  if (c.range_hi() < c.range_lo()) return absl::DataLossError("range_hi < range_lo");
  const std::uint64_t n = c.range_hi() - c.range_lo();
  if (c.weights().size() != n * 4) {
    return absl::DataLossError(absl::StrCat("weights hold ", c.weights().size(), " bytes, range needs ", n * 4));
  }
  if (!c.velocity().empty() && c.velocity().size() != n * 4) {
    return absl::DataLossError(absl::StrCat("velocity holds ", c.velocity().size(), " bytes, range needs ", n * 4));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteCheckpoint(const std::string& dir, const v1::ShardCheckpoint& checkpoint, int keep) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat(dir, ": cannot create the checkpoint directory: ", ec.message()));
  std::string payload;
  if (!checkpoint.SerializeToString(&payload)) return absl::InternalError("checkpoint does not serialize");
  std::string bytes(kMagic, sizeof(kMagic));
  PutLe(bytes, payload.size(), 8);
  PutLe(bytes, Crc(payload), 4);
  bytes += payload;
  const fs::path final_path = fs::path(dir) / FileName(checkpoint.shard_id(), checkpoint.rounds_applied());
  const fs::path tmp_path = final_path.string() + ".tmp";
  SKETCHPS_RETURN_IF_ERROR(WriteAllAndSync(tmp_path.string(), bytes));
  fs::rename(tmp_path, final_path, ec);
  if (ec) return absl::UnavailableError(absl::StrCat(final_path.string(), ": rename failed: ", ec.message()));
  SyncDir(dir);
  const auto files = ShardFiles(dir, checkpoint.shard_id());
  for (std::size_t i = static_cast<std::size_t>(std::max(keep, 1)); i < files.size(); ++i) fs::remove(files[i], ec);
  return absl::OkStatus();
}

absl::StatusOr<v1::ShardCheckpoint> ReadCheckpointFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": not a sketchps checkpoint (bad magic or too short)"));
  }
  const std::uint64_t length = GetLe(bytes, 8, 8);
  if (length > kMaxPayloadBytes || bytes.size() != kHeaderBytes + length) {
    return absl::DataLossError(absl::StrCat(path, ": truncated or padded (header says ", length, " payload bytes, file has ",
                                            bytes.size() - kHeaderBytes, ")"));
  }
  const std::string payload = bytes.substr(kHeaderBytes);
  if (Crc(payload) != GetLe(bytes, 16, 4)) return absl::DataLossError(absl::StrCat(path, ": CRC mismatch"));
  v1::ShardCheckpoint c;
  if (!c.ParseFromString(payload)) return absl::DataLossError(absl::StrCat(path, ": payload does not parse"));
  if (auto st = CheckContent(c); !st.ok()) return absl::DataLossError(absl::StrCat(path, ": ", st.message()));
  return c;
}

absl::StatusOr<LoadedCheckpoint> LoadLatest(const std::string& dir, const std::string& job_id, std::uint32_t shard_id) {
  LoadedCheckpoint out;
  for (const auto& file : ShardFiles(dir, shard_id)) {
    auto c = ReadCheckpointFile(file.string());
    if (c.ok() && (c->job_id() != job_id || c->shard_id() != shard_id)) {
      c = absl::FailedPreconditionError(absl::StrCat(file.string(), ": belongs to job '", c->job_id(), "' shard ", c->shard_id()));
    }
    if (!c.ok()) {
      out.skipped.push_back(std::string(c.status().message()));
      continue;
    }
    out.checkpoint = std::move(*c);
    out.path = file.string();
    return out;
  }
  return absl::NotFoundError(absl::StrCat(dir, ": no valid checkpoint of job '", job_id, "' shard ", shard_id,
                                          out.skipped.empty() ? "" : absl::StrCat(" (", out.skipped.size(), " invalid files skipped)")));
}

}  // namespace sketchps::server
