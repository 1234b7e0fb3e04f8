// FileKey: the secret key of keyed file integrity tags (HMAC-SHA256, OpenSSL libcrypto), which shard
// checkpoints and worker state files carry when the daemons run with --checkpoint-key-file
// (common/wire/framed_file.h; docs/security.md "Checkpoint integrity").
//
//   SKETCHPS_ASSIGN_OR_RETURN(FileKey key, FileKey::Load("/run/secrets/checkpoint.key"));
//   std::string tag = key.Tag(bytes);                       // 32 bytes
//   bool same = key.Verify(bytes, tag);                      // constant-time comparison
//
// The key is the key file's bytes, as they are (a trailing newline is part of it), at least
// kMinKeyBytes of them. Load refuses a file it cannot read, one shorter than kMinKeyBytes, and one
// that other users may read (chmod 600 / 400; group-readable is allowed, as for TLS keys, because
// Kubernetes mounts Secrets root-owned 0440 for the pod's fsGroup): errors name the file and the reason.
// WriteNewKeyFile makes a fresh random key (OpenSSL RAND_bytes) in a new file of mode 0600.
// The key's bytes are wiped (OPENSSL_cleanse) when a FileKey is destroyed. Thread-safe (const).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sketchps {

class FileKey {
 public:
  static constexpr std::size_t kMinKeyBytes = 32;
  static constexpr std::size_t kTagBytes = 32;  // HMAC-SHA256

  // Reads and checks the key file (see above). NotFound when it cannot be opened, PermissionDenied
  // when its mode lets other users read it, InvalidArgument when it is too short.
  static absl::StatusOr<FileKey> Load(const std::string& path);
  // The key of a --checkpoint-key-file flag (or its environment variable): nullptr when `path` is
  // empty (no key), else Load's key or its error.
  static absl::StatusOr<std::shared_ptr<const FileKey>> LoadIfGiven(const std::string& path);
  // A key from bytes held in memory (tests); `source` names it in messages. InvalidArgument when
  // shorter than kMinKeyBytes.
  static absl::StatusOr<FileKey> FromBytes(std::string bytes, std::string source);

  FileKey(const FileKey& other) = default;
  FileKey& operator=(const FileKey& other) = default;
  ~FileKey();

  // HMAC-SHA256 of `data` under this key: kTagBytes bytes.
  std::string Tag(std::string_view data) const;
  // Whether `tag` is the tag of `data`, compared in constant time (CRYPTO_memcmp).
  bool Verify(std::string_view data, std::string_view tag) const;
  // Where the key came from (the key file's path), for messages; never the key itself.
  const std::string& source() const { return source_; }

 private:
  FileKey(std::string bytes, std::string source) : bytes_(std::move(bytes)), source_(std::move(source)) {}
  std::string bytes_;
  std::string source_;
};

// Writes kMinKeyBytes random bytes to a new file `path` (mode 0600; AlreadyExists if it exists, so
// a key is never replaced by accident). The error names the file.
absl::Status WriteNewKeyFile(const std::string& path);

}  // namespace sketchps
