// The IDX reader (on small .gz files written here with zlib, and on the real Debian package), the
// rank partition, the epoch permutation, the P*b data order rule and batches.
#include "worker/fashion_mnist.h"

#include "worker/batch.h"
// After libtorch's headers (batch.h), so that Catch's CHECK replaces glog's.
#undef CHECK

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "job/job_spec.h"
#include "worker/idx_file.h"

using namespace sketchps::worker;
namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

namespace {

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("sketchps_idx_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

Bytes Header(std::uint32_t magic, const std::vector<std::uint32_t>& dims) {
  Bytes out;
  for (std::uint32_t v : [&] {
         auto all = dims;
         all.insert(all.begin(), magic);
         return all;
       }()) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
  }
  return out;
}

Bytes Concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void WriteGz(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

Bytes ReadRaw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void WriteRaw(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

Bytes Pixels(std::size_t images) {
  Bytes px(images * 784);
  for (std::size_t i = 0; i < px.size(); ++i) px[i] = static_cast<std::uint8_t>((i * 37 + i / 784) % 256);
  return px;
}

// A valid 3-sample pair in a fresh directory; sections overwrite one file, then Load() again.
struct IdxFixture {
  TempDir dir;
  std::string images = dir.File("images.gz");
  std::string labels = dir.File("labels.gz");
  Bytes pixels = Pixels(3);
  Bytes label_bytes = {0, 9, 4};
  IdxFixture() {
    WriteGz(images, Concat(Header(0x803, {3, 28, 28}), pixels));
    WriteGz(labels, Concat(Header(0x801, {3}), label_bytes));
  }
  absl::Status Load() const { return LoadIdxPair(images, labels).status(); }
};

std::string Message(const absl::Status& st) { return std::string(st.message()); }

void Expect(const absl::Status& st, absl::StatusCode code, const std::string& file, const std::string& what) {
  CHECK(st.code() == code);
  CHECK_THAT(Message(st), Catch::Contains(file) && Catch::Contains(what));
}

const Dataset& Load(Split split) {
  static std::map<Split, Dataset> cache;
  if (!cache.count(split)) {
    auto data = LoadFashionMnist(kDefaultFashionMnistDir, split);
    if (!data.ok()) FAIL("the Fashion-MNIST package is required (scripts/setup.sh): " << data.status().ToString());
    cache.emplace(split, *std::move(data));
  }
  return cache.at(split);
}

}  // namespace

TEST_CASE("IDX reader: a gz pair written with zlib reads back exactly", "[worker][idx]") {
  IdxFixture fx;
  const auto data = LoadIdxPair(fx.images, fx.labels);
  REQUIRE(data.ok());
  CHECK(data->size() == 3);
  CHECK(data->images == fx.pixels);
  CHECK(data->labels == fx.label_bytes);
  SECTION("uncompressed IDX files are accepted too") {
    WriteRaw(fx.labels, Concat(Header(0x801, {3}), fx.label_bytes));
    CHECK(LoadIdxPair(fx.images, fx.labels).ok());
  }
}

TEST_CASE("IDX reader: bad files and headers are rejected with a message naming the file", "[worker][idx]") {
  IdxFixture fx;
  REQUIRE(fx.Load().ok());
  SECTION("missing file") {
    fs::remove(fx.labels);
    Expect(fx.Load(), absl::StatusCode::kNotFound, fx.labels, "no such file");
  }
  SECTION("bad magic in the image file") {
    WriteGz(fx.images, Concat(Header(0x801, {3}), fx.label_bytes));
    Expect(fx.Load(), absl::StatusCode::kInvalidArgument, fx.images, "bad magic 0x00000801, expected 0x00000803");
  }
  SECTION("bad magic in the label file") {
    WriteGz(fx.labels, Concat(Header(0x0d01, {3}), fx.label_bytes));
    Expect(fx.Load(), absl::StatusCode::kInvalidArgument, fx.labels, "bad magic 0x00000d01");
  }
  SECTION("images that are not 28x28") {
    WriteGz(fx.images, Concat(Header(0x803, {3, 27, 28}), Bytes(3 * 27 * 28)));
    Expect(fx.Load(), absl::StatusCode::kInvalidArgument, fx.images, "27x28, expected 28x28");
  }
  SECTION("a count of zero") {
    WriteGz(fx.labels, Header(0x801, {0}));
    Expect(fx.Load(), absl::StatusCode::kInvalidArgument, fx.labels, "count is 0");
  }
  SECTION("an empty file") {
    WriteRaw(fx.labels, {});
    Expect(fx.Load(), absl::StatusCode::kDataLoss, fx.labels, "no IDX header");
  }
  SECTION("a directory that does not hold the dataset") {
    const auto st = LoadFashionMnist(fx.dir.File("nowhere"), Split::kTest).status();
    Expect(st, absl::StatusCode::kNotFound, fx.dir.File("nowhere/t10k-images-idx3-ubyte.gz"), "no such file");
  }
}

TEST_CASE("IDX reader: bad payloads are rejected with a message naming the file", "[worker][idx]") {
  IdxFixture fx;
  REQUIRE(fx.Load().ok());
  SECTION("fewer images than the header declares") {
    WriteGz(fx.images, Concat(Header(0x803, {5, 28, 28}), fx.pixels));
    Expect(fx.Load(), absl::StatusCode::kDataLoss, fx.images, "truncated: the header declares 5 images");
  }
  SECTION("a huge declared count does not allocate before failing") {
    WriteGz(fx.images, Concat(Header(0x803, {0xffffffffu, 28, 28}), fx.pixels));
    Expect(fx.Load(), absl::StatusCode::kDataLoss, fx.images, "truncated");
  }
  SECTION("a truncated gzip stream") {
    const Bytes gz = ReadRaw(fx.images);
    WriteRaw(fx.images, Bytes(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(gz.size() / 2)));
    Expect(fx.Load(), absl::StatusCode::kDataLoss, fx.images, "truncated");
  }
  SECTION("a gzip stream cut inside its trailer") {
    const Bytes gz = ReadRaw(fx.labels);
    WriteRaw(fx.labels, Bytes(gz.begin(), gz.end() - 4));
    Expect(fx.Load(), absl::StatusCode::kDataLoss, fx.labels, "truncated gzip stream");
  }
  SECTION("trailing bytes") {
    WriteGz(fx.labels, Concat(Header(0x801, {3}), Bytes{1, 2, 3, 4}));
    Expect(fx.Load(), absl::StatusCode::kInvalidArgument, fx.labels, "trailing bytes after 3 labels");
  }
  SECTION("image and label counts differ") {
    WriteGz(fx.labels, Concat(Header(0x801, {2}), Bytes{1, 2}));
    const auto st = fx.Load();
    Expect(st, absl::StatusCode::kInvalidArgument, fx.images, "has 3 images");
    CHECK_THAT(Message(st), Catch::Contains(fx.labels) && Catch::Contains("has 2 labels"));
  }
  SECTION("a label outside 0..9") {
    WriteGz(fx.labels, Concat(Header(0x801, {3}), Bytes{1, 10, 2}));
    Expect(fx.Load(), absl::StatusCode::kInvalidArgument, fx.labels, "label[1] = 10");
  }
}

TEST_CASE("Fashion-MNIST from the Debian package: sizes, labels and pixel statistics", "[worker][data]") {
  const Dataset& train = Load(Split::kTrain);
  const Dataset& test = Load(Split::kTest);
  CHECK(train.size() == 60000);
  CHECK(test.size() == 10000);
  CHECK(train.images.size() == 60000u * 784);
  CHECK(test.images.size() == 10000u * 784);
  std::vector<int> train_counts(10), test_counts(10);
  for (auto l : train.labels) ++train_counts.at(l);
  for (auto l : test.labels) ++test_counts.at(l);
  CHECK(train_counts == std::vector<int>(10, 6000));
  CHECK(test_counts == std::vector<int>(10, 1000));
  // The normalization constants are the training set's mean and std.
  double sum = 0.0, sum_sq = 0.0;
  for (auto v : train.images) {
    sum += v / 255.0;
    sum_sq += (v / 255.0) * (v / 255.0);
  }
  const double n = static_cast<double>(train.images.size());
  const double mean = sum / n;
  CHECK(mean == Approx(kFashionMnistMean).margin(5e-4));
  CHECK(std::sqrt(sum_sq / n - mean * mean) == Approx(kFashionMnistStd).margin(5e-4));
}

TEST_CASE("Shard: disjoint, covering and balanced for world 1..5", "[worker][data]") {
  for (const std::uint64_t n : {0ull, 1ull, 7ull, 101ull, 60000ull}) {
    for (std::uint32_t world = 1; world <= 5; ++world) {
      INFO("n " << n << ", world " << world);
      std::vector<std::uint64_t> all;
      std::uint64_t smallest = n, largest = 0;
      for (std::uint32_t rank = 0; rank < world; ++rank) {
        const auto shard = Shard(n, rank, world);
        REQUIRE(shard.ok());
        all.insert(all.end(), shard->begin(), shard->end());
        smallest = std::min<std::uint64_t>(smallest, shard->size());
        largest = std::max<std::uint64_t>(largest, shard->size());
      }
      std::vector<std::uint64_t> expected(n);
      std::iota(expected.begin(), expected.end(), std::uint64_t{0});
      CHECK(all == expected);  // disjoint + covering (and in rank order)
      CHECK(largest - smallest <= 1);
    }
  }
  CHECK(!Shard(10, 3, 3).ok());
  CHECK_THAT(Message(Shard(10, 0, 0).status()), Catch::Contains("world = 0"));
}

TEST_CASE("EpochPermutation: a deterministic permutation that changes with seed and epoch", "[worker][data]") {
  const auto p = EpochPermutation(1000, 3, 0);
  auto sorted = p;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::uint64_t> iota(1000);
  std::iota(iota.begin(), iota.end(), std::uint64_t{0});
  CHECK(sorted == iota);
  CHECK(p != iota);
  CHECK(EpochPermutation(1000, 3, 0) == p);
  CHECK(EpochPermutation(1000, 3, 1) != p);
  CHECK(EpochPermutation(1000, 4, 0) != p);
  CHECK(EpochPermutation(0, 3, 0).empty());
  // Pinned values: the order must not change silently across releases or machines.
  CHECK(std::vector<std::uint64_t>(p.begin(), p.begin() + 3) == std::vector<std::uint64_t>{903, 899, 775});
}

TEST_CASE("Data order rule: the P workers' step batches make up the single-process batch", "[worker][data]") {
  constexpr std::uint64_t n = 1003, b = 8;
  const auto perm = EpochPermutation(n, 17, 2);
  for (std::uint32_t world = 1; world <= 5; ++world) {
    INFO("world " << world);
    const std::uint64_t steps = StepsPerEpoch(n, world, b);
    CHECK(steps == n / (world * b));
    CHECK(StepsPerEpoch(n, 1, world * b) == steps);
    std::set<std::uint64_t> seen;
    for (std::uint64_t step = 0; step < steps; ++step) {
      const auto single = StepIndices(perm, step, 0, 1, world * b);
      REQUIRE(single.ok());
      std::vector<std::uint64_t> joined;
      for (std::uint32_t w = 0; w < world; ++w) {
        const auto mine = StepIndices(perm, step, w, world, b);
        REQUIRE(mine.ok());
        REQUIRE(mine->size() == b);
        joined.insert(joined.end(), mine->begin(), mine->end());
      }
      CHECK(joined == std::vector<std::uint64_t>(single->begin(), single->end()));
      seen.insert(joined.begin(), joined.end());
    }
    CHECK(seen.size() == steps * world * b);  // no sample twice within the epoch
  }
  CHECK_THAT(Message(StepIndices(perm, 125, 0, 1, 8).status()), Catch::Contains("step 125 >= steps per epoch 125"));
  CHECK(!StepIndices(perm, 0, 2, 2, 8).ok());
  CHECK(!StepIndices(perm, 0, 0, 2, 0).ok());
}

TEST_CASE("MakeBatch: normalized float input (B,1,28,28) and int64 targets", "[worker][data]") {
  IdxFixture fx;
  auto data = LoadIdxPair(fx.images, fx.labels);
  REQUIRE(data.ok());
  data->images[784 * 2] = 0;
  data->images[784 * 2 + 1] = 255;
  const std::vector<std::uint64_t> idx = {2, 0};
  const auto batch = MakeBatch(*data, idx);
  REQUIRE(batch.ok());
  CHECK(batch->input.sizes().vec() == std::vector<std::int64_t>{2, 1, 28, 28});
  CHECK(batch->input.scalar_type() == at::kFloat);
  CHECK(batch->target.scalar_type() == at::kLong);
  const float* x = batch->input.data_ptr<float>();
  CHECK(x[0] == Approx(-0.2860f / 0.3530f));
  CHECK(x[1] == Approx((1.0f - 0.2860f) / 0.3530f));
  CHECK(x[784 + 5] == Approx((data->images[5] / 255.0f - 0.2860f) / 0.3530f));
  CHECK(batch->target.data_ptr<std::int64_t>()[0] == 4);
  CHECK(batch->target.data_ptr<std::int64_t>()[1] == 0);
  const std::vector<std::uint64_t> bad = {0, 3};
  CHECK_THAT(Message(MakeBatch(*data, bad).status()), Catch::Contains("indices[1] = 3 >= dataset size 3"));
  CHECK(!MakeBatch(*data, std::span<const std::uint64_t>{}).ok());
}

TEST_CASE("IDX reader: data.path may hold the files uncompressed, as docs/job-spec.md says", "[worker][idx]") {
  // Every file without .gz, as gunzip leaves them: read as they are, by the worker and by the
  // launcher's check of the job (it used to refuse them as a missing .gz file).
  TempDir dir;
  for (const bool train : {true, false}) {
    const std::string prefix = dir.File(train ? "train" : "t10k");
    const std::uint32_t n = train ? 3 : 2;
    WriteRaw(prefix + "-images-idx3-ubyte", Concat(Header(0x803, {n, 28, 28}), Pixels(n)));
    WriteRaw(prefix + "-labels-idx1-ubyte", Concat(Header(0x801, {n}), Bytes(n, 7)));
  }
  const auto test = LoadFashionMnist(dir.File(""), Split::kTest);
  REQUIRE(test.ok());
  CHECK(test->size() == 2);
  auto job = sketchps::ParseJobSpec(sketchps::DefaultJobSpecYaml(), "t",
                                    {"data.path=" + dir.File(""), "data.train_samples=3"});
  REQUIRE(job.ok());
  const auto sizes = CheckFashionMnist(*job);
  INFO(sizes.status().ToString());
  REQUIRE(sizes.ok());
  CHECK(sizes->train == 3);
  CHECK(sizes->test == 2);
  // With both there, the .gz one is read (here: a different sample count).
  WriteGz(dir.File("t10k-images-idx3-ubyte.gz"), Concat(Header(0x803, {1, 28, 28}), Pixels(1)));
  WriteGz(dir.File("t10k-labels-idx1-ubyte.gz"), Concat(Header(0x801, {1}), Bytes(1, 3)));
  CHECK(LoadFashionMnist(dir.File(""), Split::kTest)->size() == 1);
}
