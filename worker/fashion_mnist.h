// Fashion-MNIST: the IDX reader, the dataset, the rank partition, the data order and batches.
//
// Files: <dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz, default dir
// /usr/share/datasets/fashion-mnist (Debian package dataset-fashion-mnist). The files are read with
// zlib's gz reader, so uncompressed IDX files are accepted too. Every check failure is a Status whose
// message names the file and the problem, never a crash: missing/unreadable file (NotFound), bad magic,
// dimensions other than 28x28, a count of 0, truncated or corrupt data, trailing bytes, a label
// outside 0..9, image and label counts that differ (InvalidArgument / DataLoss for corrupt gzip).
// Nothing is allocated from a header count before the data is actually there.
//
// DATA ORDER RULE (what makes P workers with batch b equal one process with batch P*b):
//   epoch e uses the permutation pi_e = EpochPermutation(N, seed, e) of [0, N);
//   global batch B = P*b; steps per epoch S = floor(N / B) (the last N mod B positions are dropped,
//   different samples each epoch);
//   at step s in [0, S), worker w in [0, P) uses the samples pi_e[s*B + w*b + j], j in [0, b).
// One process (P = 1, batch P*b) at step s therefore uses exactly the union of the P workers' step-s
// batches, in worker order. Within an epoch no two workers share a sample.
//
// Shard(n, rank, world) is the static partition of [0, n) used where no shuffling is wanted
// (e.g. splitting the test set for evaluation): contiguous, disjoint, covering, sizes differ by <= 1.
//
// Normalization: x = (pixel / 255 - 0.2860) / 0.3530 (the Fashion-MNIST train mean/std).
//
// No torch here (the Python package's core uses it as it is); batches as libtorch tensors are
// worker/batch.h.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "session/round_plan.h"

namespace sketchps::worker {

inline constexpr char kDefaultFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

struct Dataset {
  static constexpr std::int64_t kRows = 28;
  static constexpr std::int64_t kCols = 28;
  static constexpr std::int64_t kPixels = kRows * kCols;
  static constexpr std::int64_t kClasses = 10;

  std::vector<std::uint8_t> images;  // size() * kPixels bytes, image-major, row-major
  std::vector<std::uint8_t> labels;  // size() values in 0..kClasses-1
  std::uint64_t size() const { return labels.size(); }
};

enum class Split { kTrain, kTest };

// Reads <dir>/train-* (60000 samples) or <dir>/t10k-* (10000 samples).
absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, Split split);

// Reads an IDX3 ubyte image file (magic 0x00000803, N x 28 x 28) and an IDX1 ubyte label file
// (magic 0x00000801, N) and checks that they agree.
absl::StatusOr<Dataset> LoadIdxPair(const std::string& images_path, const std::string& labels_path);

// Indices [lo, hi) of `rank`'s part of [0, n) split into `world` contiguous balanced parts.
// InvalidArgument when world == 0 or rank >= world.
absl::StatusOr<std::vector<std::uint64_t>> Shard(std::uint64_t n, std::uint32_t rank, std::uint32_t world);

// The epoch's permutation of [0, n): a seeded Fisher-Yates shuffle with the portable SplitMix64
// generator, identical on every machine for the same (n, seed, epoch).
std::vector<std::uint64_t> EpochPermutation(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch);

// floor(n / (world * batch)); 0 when world or batch is 0.
std::uint64_t StepsPerEpoch(std::uint64_t n, std::uint32_t world, std::uint64_t batch);

// Worker `rank`'s `batch` sample indices at `step` by the data order rule above: a view into
// `permutation`. InvalidArgument when world == 0, rank >= world, batch == 0 or step >= StepsPerEpoch.
absl::StatusOr<std::span<const std::uint64_t>> StepIndices(std::span<const std::uint64_t> permutation,
                                                           std::uint64_t step, std::uint32_t rank, std::uint32_t world,
                                                           std::uint64_t batch);

// This worker's sample indices of each round under a plan: pi_e[position + rank*b + j], j in [0, b),
// with pi_e = EpochPermutation(N, seed, e) of the round's data epoch. Keeps
// the current data epoch's permutation. Internal error when the plan points beyond the epoch.
class BatchOrder {
 public:
  explicit BatchOrder(std::uint64_t seed) : seed_(seed) {}
  // A view valid until the next call. `step`: the inner step of a round with local steps
  // (round_plan.h), < plan.local_steps.
  absl::StatusOr<std::span<const std::uint64_t>> Of(const session::RoundPlan& plan, std::uint64_t round,
                                                    std::uint64_t step = 0);

 private:
  std::uint64_t seed_;
  std::uint64_t epoch_ = ~0ull;
  std::vector<std::uint64_t> permutation_;
};

// Writes the samples `indices`, normalized, to images[i * kPixels + p] (float32, image-major, row-major)
// and their labels to labels[i]: room for indices.size() samples. InvalidArgument when indices is
// empty or an index >= size().
absl::Status FillBatch(const Dataset& data, std::span<const std::uint64_t> indices, float* images,
                       std::int64_t* labels);

}  // namespace sketchps::worker
