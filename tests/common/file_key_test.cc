// Keyed integrity tags on framed files (common/wire/file_key.h, common/wire/framed_file.h).
#include "common/wire/file_key.h"

#include <sys/stat.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <catch2/catch.hpp>

#include "common/wire/framed_file.h"

namespace fs = std::filesystem;
using namespace sketchps;

namespace {

constexpr char kMagic[8] = {'S', 'K', 'P', 'S', 'T', 'S', 'T', '1'};
constexpr std::uint64_t kMax = 1 << 20;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("sketchps-key-" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void WriteAll(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

void WriteKeyFile(const fs::path& p, const std::string& bytes, fs::perms perms) {
  WriteAll(p, bytes);
  fs::permissions(p, perms);
}

FileKey Key(char fill) { return *FileKey::FromBytes(std::string(32, fill), "test key"); }

// The untagged layout, spelled out: magic | length (u64 LE) | CRC32 (u32 LE) | payload.
std::string OldLayout(const std::string& payload) {
  std::string bytes(kMagic, 8);
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((payload.size() >> (8 * i)) & 0xFF));
  const auto crc = crc32(0L, reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(payload.size()));
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  return bytes + payload;
}

// Writes the CRC of the payload of a tagged file (header 20 bytes, tag 32 bytes) into its header.
void RecomputeCrc(std::string& bytes) {
  const std::size_t length = bytes.size() - 20 - 32;
  const auto crc = crc32(0L, reinterpret_cast<const Bytef*>(bytes.data() + 20), static_cast<uInt>(length));
  for (int i = 0; i < 4; ++i) bytes[16 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
}

bool Contains(const absl::Status& st, const std::string& text) {
  return std::string(st.message()).find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("a tagged file reads back with its key", "[framed]") {
  TempDir dir;
  const std::string path = (dir.path / "f.bin").string();
  const FileKey key = Key('k');
  REQUIRE(WriteFramedFile(path, kMagic, "payload bytes", Durability::kSurvivesPowerLoss, &key).ok());
  const std::string bytes = ReadAll(path);
  CHECK(bytes.substr(0, 8) == "SKPKTST1");
  CHECK(bytes.size() == 20 + 13 + 32);
  auto read = ReadFramedFile(path, kMagic, kMax, &key);
  REQUIRE(read.ok());
  CHECK(*read == "payload bytes");
  CHECK(ReadAll(path) == FrameTaggedBytes(kMagic, "payload bytes", key));
}

TEST_CASE("a tagged file whose payload was edited and its CRC recomputed is refused by the tag", "[framed]") {
  TempDir dir;
  const fs::path path = dir.path / "f.bin";
  const FileKey key = Key('k');
  REQUIRE(WriteFramedFile(path.string(), kMagic, "weights: 1 2 3", Durability::kSurvivesPowerLoss, &key).ok());
  std::string bytes = ReadAll(path);
  bytes[20 + 9] ^= 0x01;  // a payload byte
  RecomputeCrc(bytes);
  WriteAll(path, bytes);
  auto read = ReadFramedFile(path.string(), kMagic, kMax, &key);
  REQUIRE(!read.ok());
  CHECK(read.status().code() == absl::StatusCode::kDataLoss);
  CHECK(Contains(read.status(), path.string() + ": integrity tag does not match the checkpoint key"));
  CHECK(IsKeyError(read.status()));
  // The header's length edited too (a longer payload, CRC recomputed): the tag still catches it.
  std::string longer = FrameTaggedBytes(kMagic, "weights: 1 2 3", key);
  longer.insert(20 + 14, "4");
  longer[8] = 15;
  RecomputeCrc(longer);
  CHECK(IsKeyError(UnframeBytes(longer, kMagic, kMax, "longer", &key).status()));
}

TEST_CASE("a tagged file under another key is refused", "[framed]") {
  const std::string bytes = FrameTaggedBytes(kMagic, "payload", Key('a'));
  const FileKey other = Key('b');
  auto read = UnframeBytes(bytes, kMagic, kMax, "x.bin", &other);
  REQUIRE(!read.ok());
  CHECK(Contains(read.status(),
                 "x.bin: integrity tag does not match the checkpoint key (tampered, or written with "
                 "another key)"));
}

TEST_CASE("a truncated tagged file is refused naming the file", "[framed]") {
  TempDir dir;
  const fs::path path = dir.path / "f.bin";
  const FileKey key = Key('k');
  REQUIRE(WriteFramedFile(path.string(), kMagic, std::string(100, 'x'), Durability::kSurvivesPowerLoss, &key).ok());
  const std::string whole = ReadAll(path);
  for (std::size_t cut : {std::size_t{1}, std::size_t{31}, std::size_t{32}, std::size_t{60}, whole.size() - 20}) {
    WriteAll(path, whole.substr(0, whole.size() - cut));
    auto read = ReadFramedFile(path.string(), kMagic, kMax, &key);
    REQUIRE(!read.ok());
    CHECK(read.status().code() == absl::StatusCode::kDataLoss);
    CHECK(Contains(read.status(), path.string() + ": truncated"));
  }
}

TEST_CASE("a tagged file read without a key names the flag", "[framed]") {
  const std::string bytes = FrameTaggedBytes(kMagic, "payload", Key('k'));
  auto read = UnframeBytes(bytes, kMagic, kMax, "ckpt.bin");
  REQUIRE(!read.ok());
  CHECK(read.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(Contains(read.status(), "ckpt.bin: written with a checkpoint key"));
  CHECK(Contains(read.status(), "--checkpoint-key-file"));
  CHECK(IsKeyError(read.status()));
}

TEST_CASE("an untagged file read with a key is refused", "[framed]") {
  const FileKey key = Key('k');
  auto read = UnframeBytes(FrameBytes(kMagic, "payload"), kMagic, kMax, "old.bin", &key);
  REQUIRE(!read.ok());
  CHECK(read.status().code() == absl::StatusCode::kDataLoss);
  CHECK(Contains(read.status(), "old.bin: has no integrity tag"));
  CHECK(IsKeyError(read.status()));
  // A tagged file with its magic put back to the untagged one is refused too (the tag is then
  // trailing bytes the length does not count).
  std::string bytes = FrameTaggedBytes(kMagic, "payload", key);
  bytes[3] = 'S';
  CHECK(!UnframeBytes(bytes, kMagic, kMax, "x", &key).ok());
  CHECK(!UnframeBytes(bytes, kMagic, kMax, "x").ok());
}

TEST_CASE("untagged files keep the old layout byte for byte and read without a key", "[framed]") {
  TempDir dir;
  const std::string path = (dir.path / "f.bin").string();
  REQUIRE(WriteFramedFile(path, kMagic, "old payload").ok());
  CHECK(ReadAll(path) == OldLayout("old payload"));
  CHECK(FrameBytes(kMagic, "old payload") == OldLayout("old payload"));
  auto read = ReadFramedFile(path, kMagic, kMax);
  REQUIRE(read.ok());
  CHECK(*read == "old payload");
  // Damage that is not about the key is not a key error.
  std::string bytes = OldLayout("old payload");
  bytes.back() ^= 1;
  auto crc = UnframeBytes(bytes, kMagic, kMax, "f");
  CHECK(!crc.ok());
  CHECK(!IsKeyError(crc.status()));
}

TEST_CASE("key files are refused when short, missing or readable by others", "[framed]") {
  TempDir dir;
  const fs::path good = dir.path / "good.key";
  WriteKeyFile(good, std::string(32, 'g'), fs::perms::owner_read | fs::perms::owner_write);
  auto key = FileKey::Load(good.string());
  REQUIRE(key.ok());
  CHECK(key->source() == good.string());
  CHECK(key->Tag("x").size() == FileKey::kTagBytes);
  CHECK(key->Tag("x") == Key('g').Tag("x"));

  const fs::path short_key = dir.path / "short.key";
  WriteKeyFile(short_key, std::string(31, 's'), fs::perms::owner_read);
  auto st = FileKey::Load(short_key.string()).status();
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(st, short_key.string() + ": the checkpoint key holds 31 bytes, fewer than the 32 needed"));

  const fs::path missing = dir.path / "missing.key";
  st = FileKey::Load(missing.string()).status();
  CHECK(st.code() == absl::StatusCode::kNotFound);
  CHECK(Contains(st, missing.string() + ": cannot open the checkpoint key file"));

  for (fs::perms extra : {fs::perms::others_read, fs::perms::others_read | fs::perms::group_read}) {
    const fs::path open_key = dir.path / "open.key";
    WriteKeyFile(open_key, std::string(32, 'o'), fs::perms::owner_read | fs::perms::owner_write | extra);
    st = FileKey::Load(open_key.string()).status();
    CHECK(st.code() == absl::StatusCode::kPermissionDenied);
    CHECK(Contains(st, open_key.string() + ": the checkpoint key file is readable by other users"));
    fs::remove(open_key);
  }
  {  // group-readable, as Kubernetes mounts a Secret for the pod's fsGroup (0440): accepted
    const fs::path secret = dir.path / "secret.key";
    WriteKeyFile(secret, std::string(32, 's'), fs::perms::owner_read | fs::perms::group_read);
    CHECK(FileKey::Load(secret.string()).ok());
  }
  st = FileKey::Load(dir.path.string()).status();  // a directory
  CHECK(!st.ok());
  CHECK(Contains(st, dir.path.string()));
}

TEST_CASE("WriteNewKeyFile makes a private random key once", "[framed]") {
  TempDir dir;
  const std::string path = (dir.path / "checkpoint.key").string();
  REQUIRE(WriteNewKeyFile(path).ok());
  CHECK((fs::status(path).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
  CHECK(fs::file_size(path) == FileKey::kMinKeyBytes);
  const std::string first = ReadAll(path);
  CHECK(WriteNewKeyFile(path).code() == absl::StatusCode::kAlreadyExists);
  CHECK(ReadAll(path) == first);
  CHECK(FileKey::Load(path).ok());
}
