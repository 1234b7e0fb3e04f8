#include "ps/checkpoint.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "common/reason.h"
#include "common/wire/file_key.h"
#include "common/wire/framed_file.h"
#include "common/wire/layout_proto.h"
#include "ps/export.h"

namespace fs = std::filesystem;
using namespace sketchps;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("sketchps-ckpt-" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

v1::ShardCheckpoint Make(std::uint64_t rounds, std::uint32_t shard = 1, std::size_t n = 10) {
  v1::ShardCheckpoint c;
  c.set_job_id("job");
  c.set_shard_id(shard);
  c.set_num_shards(2);
  c.set_range_lo(100);
  c.set_range_hi(100 + n);
  c.set_rounds_applied(rounds);
  std::string w(n * 4, '\0');
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<char>(i + rounds);
  c.set_weights(w);
  return c;
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void WriteAll(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

FileKey Key(char fill) { return *FileKey::FromBytes(std::string(32, fill), "test.key"); }

// Writes the CRC of a tagged file's payload into its header (20 header bytes, a 32-byte tag).
void RecomputeCrc(std::string& bytes) {
  const auto crc = crc32(0L, reinterpret_cast<const Bytef*>(bytes.data() + 20), static_cast<uInt>(bytes.size() - 52));
  for (int i = 0; i < 4; ++i) bytes[16 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
}

}  // namespace

TEST_CASE("Checkpoints round-trip and only the newest `keep` remain", "[checkpoint]") {
  TempDir dir;
  for (std::uint64_t r = 1; r <= 4; ++r) REQUIRE(ps::WriteCheckpoint(dir.path.string(), Make(r)).ok());
  REQUIRE(ps::WriteCheckpoint(dir.path.string(), Make(7, /*shard=*/0)).ok());
  auto loaded = ps::LoadLatest(dir.path.string(), "job", 1);
  REQUIRE(loaded.ok());
  CHECK(loaded->checkpoint.rounds_applied() == 4);
  CHECK(loaded->checkpoint.weights() == Make(4).weights());
  std::size_t shard1_files = 0;
  for (const auto& e : fs::directory_iterator(dir.path))
    shard1_files += e.path().filename().string().rfind("shard-1-", 0) == 0;
  CHECK(shard1_files == 3);  // the default keep: 3 (rounds 2, 3, 4)
  CHECK(ps::LoadLatest(dir.path.string(), "job", 0)->checkpoint.rounds_applied() == 7);
  CHECK(ps::LoadLatest(dir.path.string(), "other-job", 1).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("A damaged newest checkpoint is refused naming the shard and the file, or skipped when asked",
          "[checkpoint]") {
  TempDir dir;
  REQUIRE(ps::WriteCheckpoint(dir.path.string(), Make(1)).ok());
  REQUIRE(ps::WriteCheckpoint(dir.path.string(), Make(2)).ok());
  const fs::path newest = dir.path / "shard-1-round-000000000002.ckpt";
  const std::string good = ReadAll(newest);
  std::mt19937_64 rng(5);
  int refused_by_default = 0, skipped_when_asked = 0;
  for (int variant = 0; variant < 100; ++variant) {
    std::string bad = good;
    switch (variant % 4) {
      case 0: bad.resize(rng() % bad.size()); break;                                 // truncated
      case 1: bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255); break;  // bit flip
      case 2: bad += std::string(1 + rng() % 64, 'x'); break;                        // padded
      case 3: {                                                                      // valid frame, wrong shape
        auto c = Make(2);
        c.set_range_hi(c.range_hi() + 1 + rng() % 5);
        REQUIRE(ps::WriteCheckpoint((dir.path / "scratch").string(), c).ok());
        bad = ReadAll(dir.path / "scratch" / "shard-1-round-000000000002.ckpt");
        break;
      }
    }
    WriteAll(newest, bad);
    CHECK(IsDamagedFile(ps::ReadCheckpointFile(newest.string()).status()));
    // Refused, naming the shard and the file: never a silent fall-back to round 1.
    auto refused = ps::LoadLatest(dir.path.string(), "job", 1);
    const std::string message(refused.status().message());
    refused_by_default += refused.status().code() == absl::StatusCode::kDataLoss &&
                          absl::StrContains(message, "shard 1's newest checkpoint is damaged: " + newest.string()) &&
                          absl::StrContains(message, "checkpoint.on_damaged: older");
    // checkpoint.on_damaged: older: the previous one, the damaged file reported.
    auto loaded = ps::LoadLatest(dir.path.string(), "job", 1, nullptr, /*older_if_damaged=*/true);
    REQUIRE(loaded.ok());
    skipped_when_asked += loaded->checkpoint.rounds_applied() == 1 && loaded->skipped.size() == 1;
  }
  CHECK(refused_by_default == 100);
  CHECK(skipped_when_asked == 100);
}

TEST_CASE("Checkpoint errors name the file and the problem", "[checkpoint]") {
  TempDir dir;
  const fs::path junk = dir.path / "shard-1-round-000000000009.ckpt";
  WriteAll(junk, "hello");
  auto r = ps::ReadCheckpointFile(junk.string());
  CHECK(r.status().code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(r.status().message()), Catch::Contains(junk.string()) && Catch::Contains("bad magic"));
  CHECK(ps::LoadLatest(dir.path.string(), "job", 1).status().code() == absl::StatusCode::kDataLoss);
  auto none = ps::LoadLatest(dir.path.string(), "job", 1, nullptr, /*older_if_damaged=*/true);
  CHECK(none.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(none.status().message()), Catch::Contains("1 invalid files skipped"));
  WriteAll(dir.path / "file", "x");
  CHECK(ps::WriteCheckpoint((dir.path / "file" / "sub").string(), Make(1)).code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("CheckpointRounds reads each shard's rounds from the file names", "[checkpoint]") {
  TempDir dir;
  CHECK(ps::CheckpointRounds((dir.path / "missing").string()).empty());
  for (std::uint64_t r : {3, 12}) REQUIRE(ps::WriteCheckpoint(dir.path.string(), Make(r, /*shard=*/1)).ok());
  REQUIRE(ps::WriteCheckpoint(dir.path.string(), Make(1000000000000 - 1, /*shard=*/0)).ok());
  WriteAll(dir.path / "shard-2-round-7.ckpt", "not the checkpoint naming (12 digits)");
  WriteAll(dir.path / "shard-3-round-000000000009.tmp", "not a checkpoint");
  const auto rounds = ps::CheckpointRounds(dir.path.string());
  REQUIRE(rounds.size() == 2);
  CHECK(rounds.at(0) == std::set<std::uint64_t>{999999999999ull});
  CHECK(rounds.at(1) == std::set<std::uint64_t>{3, 12});
}

TEST_CASE("SetAsideCheckpointsAfter moves a shard's newer files away so that LoadLatest finds the round",
          "[checkpoint]") {
  TempDir dir;
  for (std::uint64_t r : {4, 8, 9}) REQUIRE(ps::WriteCheckpoint(dir.path.string(), Make(r, 0), /*keep=*/3).ok());
  REQUIRE(ps::WriteCheckpoint(dir.path.string(), Make(9, 1)).ok());
  const std::string aside = (dir.path / "superseded").string();
  auto moved = ps::SetAsideCheckpointsAfter(dir.path.string(), 0, 4, aside);
  REQUIRE(moved.ok());
  CHECK(moved->size() == 2);
  CHECK(fs::exists(fs::path(aside) / "shard-0-round-000000000009.ckpt"));
  CHECK(ps::CheckpointRounds(dir.path.string()).at(0) == std::set<std::uint64_t>{4});
  CHECK(ps::CheckpointRounds(dir.path.string()).at(1) == std::set<std::uint64_t>{9});  // other shards untouched
  auto loaded = ps::LoadLatest(dir.path.string(), "job", 0);
  REQUIRE(loaded.ok());
  CHECK(loaded->checkpoint.rounds_applied() == 4);
  auto none = ps::SetAsideCheckpointsAfter(dir.path.string(), 0, 4, aside);
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE("Checkpoints written with a key round-trip with it", "[checkpoint]") {
  TempDir dir;
  const FileKey key = Key('k');
  for (std::uint64_t r = 1; r <= 4; ++r) REQUIRE(ps::WriteCheckpoint(dir.path.string(), Make(r), 3, &key).ok());
  const fs::path newest = dir.path / "shard-1-round-000000000004.ckpt";
  CHECK(ReadAll(newest).substr(0, 8) == "SKPKCKP1");
  auto loaded = ps::LoadLatest(dir.path.string(), "job", 1, &key);
  REQUIRE(loaded.ok());
  CHECK(loaded->checkpoint.rounds_applied() == 4);
  CHECK(loaded->checkpoint.weights() == Make(4).weights());
  CHECK(loaded->skipped.empty());
  auto read = ps::ReadCheckpointFile(newest.string(), &key);
  REQUIRE(read.ok());
  CHECK(read->SerializeAsString() == Make(4).SerializeAsString());
  CHECK(ps::ParseCheckpointBytes(ReadAll(newest), "bytes", &key).ok());
}

TEST_CASE("A tampered keyed checkpoint stops LoadLatest naming the file", "[checkpoint]") {
  TempDir dir;
  const FileKey key = Key('k');
  REQUIRE(ps::WriteCheckpoint(dir.path.string(), Make(1), 3, &key).ok());
  REQUIRE(ps::WriteCheckpoint(dir.path.string(), Make(2), 3, &key).ok());
  const fs::path newest = dir.path / "shard-1-round-000000000002.ckpt";
  const std::string good = ReadAll(newest);
  std::string bad = good;
  bad[bad.size() - 40] ^= 0x10;  // a weight byte, near the payload's end
  RecomputeCrc(bad);
  WriteAll(newest, bad);
  auto loaded = ps::LoadLatest(dir.path.string(), "job", 1, &key);
  REQUIRE(!loaded.ok());
  CHECK(loaded.status().code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(loaded.status().message()),
             Catch::Contains(newest.string() + ": integrity tag does not match the checkpoint key"));

  // Another key: refused the same way.
  WriteAll(newest, good);
  const FileKey other = Key('o');
  CHECK(IsKeyError(ps::LoadLatest(dir.path.string(), "job", 1, &other).status()));

  // No key: refused naming the flag, not skipped (a shard must not fall back to a fresh start).
  auto keyless = ps::LoadLatest(dir.path.string(), "job", 1);
  REQUIRE(!keyless.ok());
  CHECK(keyless.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(keyless.status().message()),
             Catch::Contains(newest.string()) && Catch::Contains("--checkpoint-key-file"));

  // A torn keyed file is refused as without a key, and skipped for the one before it when asked.
  WriteAll(newest, good.substr(0, good.size() - 5));
  CHECK(IsDamagedFile(ps::LoadLatest(dir.path.string(), "job", 1, &key).status()));
  auto torn = ps::LoadLatest(dir.path.string(), "job", 1, &key, /*older_if_damaged=*/true);
  REQUIRE(torn.ok());
  CHECK(torn->checkpoint.rounds_applied() == 1);
  REQUIRE(torn->skipped.size() == 1);
  CHECK_THAT(torn->skipped[0], Catch::Contains(newest.string() + ": truncated"));
}

TEST_CASE("Under a key an untagged checkpoint is refused, without one it loads as before", "[checkpoint]") {
  TempDir dir;
  REQUIRE(ps::WriteCheckpoint(dir.path.string(), Make(3)).ok());
  const fs::path file = dir.path / "shard-1-round-000000000003.ckpt";
  CHECK(ReadAll(file) == FrameBytes(ps::kCheckpointMagic, Make(3).SerializeAsString()));
  CHECK(ps::LoadLatest(dir.path.string(), "job", 1).ok());
  const FileKey key = Key('k');
  auto loaded = ps::LoadLatest(dir.path.string(), "job", 1, &key);
  REQUIRE(!loaded.ok());
  CHECK(loaded.status().code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(loaded.status().message()), Catch::Contains(file.string() + ": has no integrity tag"));
}

TEST_CASE("Export names a shard's damaged newest checkpoint, not the older file it would have used", "[checkpoint]") {
  // As a folder whose shard 1 holds rounds 100 and a damaged 151: the export used to load round 100
  // of shard 1 and blame that file for not matching shard 0's round 151.
  TempDir dir;
  const LayerTable layers = MakeLayerTable({{"w", {8}}});
  for (std::uint32_t shard : {0u, 1u}) {
    for (std::uint64_t round : {100u, 151u}) {
      v1::ShardCheckpoint c;
      c.set_job_id("job");
      c.set_shard_id(shard);
      c.set_num_shards(2);
      c.set_range_lo(4 * shard);
      c.set_range_hi(4 * shard + 4);
      c.set_rounds_applied(round);
      c.set_weights(std::string(16, '\0'));
      LayersToProto(layers, c.mutable_layers());
      REQUIRE(ps::WriteCheckpoint(dir.path.string(), c).ok());
    }
  }
  REQUIRE(ps::LoadCheckpointedModel(dir.path.string(), "job", 2).ok());
  const fs::path newest = dir.path / ps::CheckpointFileName(1, 151);
  std::string bad = ReadAll(newest);
  bad[bad.size() / 2] ^= 0x01;
  WriteAll(newest, bad);
  auto model = ps::LoadCheckpointedModel(dir.path.string(), "job", 2);
  REQUIRE(!model.ok());
  const std::string message(model.status().message());
  CHECK_THAT(message, Catch::Contains("shard 1's newest checkpoint is damaged: " + newest.string()));
  CHECK_THAT(message, !Catch::Contains(ps::CheckpointFileName(1, 100)));
}
