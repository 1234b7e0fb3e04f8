#include "common/file_write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/termination.h"

namespace sketchps {
namespace {

absl::Status Failed(const std::string& path, const char* what, int error) {
  return absl::UnavailableError(absl::StrCat(path, ": ", what, " failed: ", std::strerror(error)));
}

// Writes all of `bytes` to `fd` (named `path` in errors).
absl::Status WriteAll(int fd, const std::string& path, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Failed(path, "write", errno);
    done += static_cast<std::size_t>(n);
  }
  return absl::OkStatus();
}

// Creates `path` with `bytes`; with `sync`, fsynced before it is closed. Every step is checked.
absl::Status CreateFile(const std::string& path, const std::string& bytes, bool sync, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Failed(path, "create", errno);
  absl::Status status = WriteAll(fd, path, bytes);
  if (status.ok() && sync && ::fsync(fd) != 0) status = Failed(path, "fsync", errno);
  if (::close(fd) != 0 && status.ok()) status = Failed(path, "close", errno);
  return status;
}

void SyncDir(const std::filesystem::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, const std::string& content, Durability durability,
                                 unsigned mode) {
  TerminationWaitsForThis guard;
  const std::string tmp = path + ".tmp";
  const bool sync = durability == Durability::kSurvivesPowerLoss;
  absl::Status status = CreateFile(tmp, content, sync, static_cast<mode_t>(mode));
  if (status.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) status = Failed(path, "rename", errno);
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  if (sync) SyncDir(std::filesystem::path(path).parent_path());
  return absl::OkStatus();
}

AppendOnlyFile::~AppendOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status AppendOnlyFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Failed(path, "open for appending", errno);
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  path_ = path;
  return absl::OkStatus();
}

absl::Status AppendOnlyFile::Append(const std::string& record) {
  if (fd_ < 0) return absl::OkStatus();
  TerminationWaitsForThis guard;
  struct stat before {};
  if (::fstat(fd_, &before) != 0) return Failed(path_, "stat", errno);
  absl::Status status = WriteAll(fd_, path_, record);
  // Half a record would make every later reader fail on it: cut it off again.
  if (!status.ok() && ::ftruncate(fd_, before.st_size) != 0) {
    status = absl::UnavailableError(
        absl::StrCat(status.message(), "; cutting the partial record off failed too: ", std::strerror(errno)));
  }
  return status;
}

}  // namespace sketchps
