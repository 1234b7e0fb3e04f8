#include "common/wire/framed_file.h"

#include <zlib.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/file_write.h"
#include "common/reason.h"
#include "common/status.h"
#include "common/wire/file_key.h"

namespace sketchps {
namespace {

constexpr std::size_t kHeaderBytes = 8 + 8 + 4;
constexpr char kKeyFlag[] = "--checkpoint-key-file (env SKETCHPS_CHECKPOINT_KEY_FILE)";

// The magic of the tagged format: the fourth byte becomes 'K' (docs in the header).
std::string TaggedMagic(const char (&magic)[8]) {
  std::string tagged(magic, sizeof(magic));
  tagged[3] = 'K';
  return tagged;
}

absl::Status KeyError(absl::Status status) { return WithReason(std::move(status), Reason::kCheckpointKey); }
absl::Status Damaged(std::string message) { return WithReason(absl::DataLossError(message), Reason::kDamagedFile); }

void PutLe(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

std::uint64_t GetLe(const std::string& in, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint64_t{static_cast<unsigned char>(in[at + i])} << (8 * i);
  return v;
}

std::uint32_t Crc(const char* data, std::size_t size) {
  return static_cast<std::uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(data), static_cast<uInt>(size)));
}

}  // namespace

std::string FrameBytes(const char (&magic)[8], const std::string& payload) {
  std::string bytes(magic, sizeof(magic));
  PutLe(bytes, payload.size(), 8);
  PutLe(bytes, Crc(payload.data(), payload.size()), 4);
  bytes += payload;
  return bytes;
}

std::string FrameTaggedBytes(const char (&magic)[8], const std::string& payload, const FileKey& key) {
  std::string bytes = FrameBytes(magic, payload);
  const std::string tagged = TaggedMagic(magic);
  bytes.replace(0, tagged.size(), tagged);
  bytes += key.Tag(bytes);
  return bytes;
}

absl::Status WriteFramedFile(const std::string& path, const char (&magic)[8], const std::string& payload,
                             Durability durability, const FileKey* key) {
  const std::string bytes = key ? FrameTaggedBytes(magic, payload, *key) : FrameBytes(magic, payload);
  return WriteFileAtomically(path, bytes, durability, 0600);
}

absl::StatusOr<std::string> ReadFramedFile(const std::string& path, const char (&magic)[8], std::uint64_t max_payload,
                                           const FileKey* key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return UnframeBytes(std::move(bytes), magic, max_payload, path, key);
}

absl::StatusOr<std::string> UnframeBytes(std::string bytes, const char (&magic)[8], std::uint64_t max_payload,
                                         const std::string& name, const FileKey* key) {
  const std::string tagged_magic = TaggedMagic(magic);
  const bool tagged = bytes.size() >= kHeaderBytes && bytes.compare(0, tagged_magic.size(), tagged_magic) == 0;
  if (!tagged && (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), magic, sizeof(magic)) != 0)) {
    return Damaged(absl::StrCat(name, ": not a ", std::string(magic, sizeof(magic)), " file (bad magic or too short)"));
  }
  if (tagged && key == nullptr) {
    return KeyError(absl::FailedPreconditionError(absl::StrCat(
        name, ": written with a checkpoint key (it carries an integrity tag); pass the key file with ", kKeyFlag)));
  }
  if (!tagged && key != nullptr) {
    return KeyError(absl::DataLossError(
        absl::StrCat(name, ": has no integrity tag, but a checkpoint key was given (", key->source(),
                     "): it was written without the key, or someone without it wrote or replaced it")));
  }
  const std::size_t trailer = tagged ? FileKey::kTagBytes : 0;
  const std::uint64_t length = GetLe(bytes, 8, 8);
  if (length > max_payload || bytes.size() < kHeaderBytes + trailer ||
      bytes.size() - kHeaderBytes - trailer != length) {
    return Damaged(absl::StrCat(name, ": truncated or padded (header says ", length, " payload bytes",
                                tagged ? " and a 32-byte integrity tag" : "", ", file has ",
                                bytes.size() - kHeaderBytes,
                                tagged ? " bytes after the header)" : ")"));  // untagged: as it was
  }
  if (Crc(bytes.data() + kHeaderBytes, length) != GetLe(bytes, 16, 4))
    return Damaged(absl::StrCat(name, ": CRC mismatch"));
  if (tagged) {
    const std::size_t signed_bytes = kHeaderBytes + length;
    if (!key->Verify(std::string_view(bytes).substr(0, signed_bytes), std::string_view(bytes).substr(signed_bytes))) {
      return KeyError(absl::DataLossError(absl::StrCat(
          name, ": integrity tag does not match the checkpoint key (tampered, or written with another key)")));
    }
    bytes.resize(signed_bytes);
  }
  bytes.erase(0, kHeaderBytes);
  return bytes;
}

bool IsKeyError(const absl::Status& status) { return ReasonOf(status) == Reason::kCheckpointKey; }

}  // namespace sketchps
