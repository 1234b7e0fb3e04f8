#include "common/wire/file_key.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace sketchps {
namespace {

// Reads the whole of the open file `fd`.
absl::StatusOr<std::string> ReadAll(int fd, const std::string& path) {
  std::string bytes;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat(path, ": cannot read the key file: ", std::strerror(errno)));
    if (n == 0) break;
    bytes.append(buffer, static_cast<std::size_t>(n));
    if (bytes.size() > (1 << 20)) return absl::InvalidArgumentError(absl::StrCat(path, ": key file larger than 1 MiB"));
  }
  OPENSSL_cleanse(buffer, sizeof(buffer));
  return bytes;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const FileKey>> FileKey::LoadIfGiven(const std::string& path) {
  if (path.empty()) return std::shared_ptr<const FileKey>();
  SKETCHPS_ASSIGN_OR_RETURN(FileKey key, Load(path));
  return std::make_shared<const FileKey>(std::move(key));
}

absl::StatusOr<FileKey> FileKey::Load(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open the checkpoint key file: ", std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": the checkpoint key file is not a regular file"));
  }
  // As the TLS key check (common/net/tls.cc): other users' read is refused, the group's is allowed,
  // since Kubernetes mounts Secrets root-owned and group-readable (0440, the pod's fsGroup).
  if ((st.st_mode & S_IROTH) != 0) {
    ::close(fd);
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s: the checkpoint key file is readable by other users (mode %04o); make it private: chmod 600 %s", path,
        st.st_mode & 07777, path));
  }
  auto bytes = ReadAll(fd, path);
  ::close(fd);
  if (!bytes.ok()) return bytes.status();
  return FromBytes(*std::move(bytes), path);
}

absl::StatusOr<FileKey> FileKey::FromBytes(std::string bytes, std::string source) {
  if (bytes.size() < kMinKeyBytes) {
    const std::size_t size = bytes.size();
    OPENSSL_cleanse(bytes.data(), bytes.size());
    return absl::InvalidArgumentError(absl::StrCat(source, ": the checkpoint key holds ", size,
                                                   " bytes, fewer than the ", kMinKeyBytes,
                                                   " needed (make one: head -c 32 /dev/urandom > FILE)"));
  }
  return FileKey(std::move(bytes), std::move(source));
}

FileKey::~FileKey() {
  if (!bytes_.empty()) OPENSSL_cleanse(bytes_.data(), bytes_.size());
}

std::string FileKey::Tag(std::string_view data) const {
  std::string tag(EVP_MAX_MD_SIZE, '\0');
  unsigned int length = 0;
  // HMAC() fails only for an unknown digest or when out of memory.
  if (HMAC(EVP_sha256(), bytes_.data(), static_cast<int>(bytes_.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(),
           reinterpret_cast<unsigned char*>(tag.data()), &length) == nullptr ||
      length != kTagBytes) {
    return std::string();  // never equal to a stored tag of kTagBytes
  }
  tag.resize(length);
  return tag;
}

bool FileKey::Verify(std::string_view data, std::string_view tag) const {
  const std::string expected = Tag(data);
  return expected.size() == kTagBytes && tag.size() == kTagBytes &&
         CRYPTO_memcmp(expected.data(), tag.data(), kTagBytes) == 0;
}

absl::Status WriteNewKeyFile(const std::string& path) {
  unsigned char key[FileKey::kMinKeyBytes];
  if (RAND_bytes(key, sizeof(key)) != 1) {
    return absl::InternalError(absl::StrCat(path, ": cannot make a checkpoint key: no random bytes from OpenSSL"));
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    OPENSSL_cleanse(key, sizeof(key));
    const std::string why = std::strerror(errno);
    if (errno == EEXIST) return absl::AlreadyExistsError(absl::StrCat(path, ": the checkpoint key file exists"));
    return absl::UnavailableError(absl::StrCat(path, ": cannot create the checkpoint key file: ", why));
  }
  std::size_t done = 0;
  bool ok = true;
  while (done < sizeof(key)) {
    const ssize_t n = ::write(fd, key + done, sizeof(key) - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  OPENSSL_cleanse(key, sizeof(key));
  ok = ok && ::fsync(fd) == 0;
  const std::string why = ok ? "" : std::strerror(errno);
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    return absl::UnavailableError(absl::StrCat(path, ": cannot write the checkpoint key file: ", why));
  }
  return absl::OkStatus();
}

}  // namespace sketchps
