#include "worker/fashion_mnist.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "worker/idx_file.h"
#include "worker/rng.h"

namespace sketchps::worker {
namespace {

// Reads exactly `n` payload bytes of `what`, then checks the stream ends cleanly.
absl::StatusOr<std::vector<std::uint8_t>> ReadPayload(gzFile f, const std::string& path, std::uint64_t n,
                                                      const std::string& what) {
  std::vector<std::uint8_t> out;
  out.reserve(std::min<std::uint64_t>(n, 1u << 26));
  SKETCHPS_ASSIGN_OR_RETURN(auto got, ReadBytes(f, path, n, out));
  if (got < n) {
    return absl::DataLossError(absl::StrCat(path, ": truncated: the header declares ", what, " (", n,
                                            " bytes after the header) but only ", got, " are present", GzMessage(f)));
  }
  std::vector<std::uint8_t> extra;
  SKETCHPS_ASSIGN_OR_RETURN(got, ReadBytes(f, path, 1, extra));
  if (got != 0) return absl::InvalidArgumentError(absl::StrCat(path, ": trailing bytes after ", what));
  int code = Z_OK;
  gzerror(f, &code);
  if (code != Z_OK) return absl::DataLossError(absl::StrCat(path, ": truncated gzip stream", GzMessage(f)));
  return out;
}

absl::StatusOr<std::vector<std::uint8_t>> ReadImages(const std::string& path, std::uint64_t* count) {
  SKETCHPS_ASSIGN_OR_RETURN(GzFile f, OpenGz(path));
  SKETCHPS_ASSIGN_OR_RETURN(auto dims, ReadHeader(f.get(), path, kImagesMagic));
  if (dims[1] != Dataset::kRows || dims[2] != Dataset::kCols) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": images are ", dims[1], "x", dims[2], ", expected 28x28"));
  }
  *count = dims[0];
  return ReadPayload(f.get(), path, std::uint64_t{dims[0]} * Dataset::kPixels, absl::StrCat(dims[0], " images"));
}

absl::StatusOr<std::vector<std::uint8_t>> ReadLabels(const std::string& path) {
  SKETCHPS_ASSIGN_OR_RETURN(GzFile f, OpenGz(path));
  SKETCHPS_ASSIGN_OR_RETURN(auto dims, ReadHeader(f.get(), path, kLabelsMagic));
  SKETCHPS_ASSIGN_OR_RETURN(auto labels, ReadPayload(f.get(), path, dims[0], absl::StrCat(dims[0], " labels")));
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= Dataset::kClasses) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": label[", i, "] = ", labels[i], ", expected 0..9"));
    }
  }
  return labels;
}

}  // namespace

absl::StatusOr<Dataset> LoadIdxPair(const std::string& images_path, const std::string& labels_path) {
  Dataset data;
  std::uint64_t count = 0;
  SKETCHPS_ASSIGN_OR_RETURN(data.images, ReadImages(images_path, &count));
  SKETCHPS_ASSIGN_OR_RETURN(data.labels, ReadLabels(labels_path));
  if (data.labels.size() != count) {
    return absl::InvalidArgumentError(absl::StrCat("image/label count mismatch: ", images_path, " has ", count,
                                                   " images but ", labels_path, " has ", data.labels.size(),
                                                   " labels"));
  }
  return data;
}

absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, Split split) {
  const IdxPaths paths = FashionMnistPaths(dir, split == Split::kTrain);
  return LoadIdxPair(paths.images, paths.labels);
}

absl::StatusOr<std::vector<std::uint64_t>> Shard(std::uint64_t n, std::uint32_t rank, std::uint32_t world) {
  if (world == 0 || rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat("Shard: rank ", rank, " is not in [0, world = ", world, ")"));
  }
  const std::uint64_t base = n / world;
  const std::uint64_t rem = n % world;
  const std::uint64_t lo = rank * base + std::min<std::uint64_t>(rank, rem);
  const std::uint64_t size = base + (rank < rem ? 1 : 0);
  std::vector<std::uint64_t> out(size);
  for (std::uint64_t i = 0; i < size; ++i) out[i] = lo + i;
  return out;
}

std::vector<std::uint64_t> EpochPermutation(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch) {
  SplitMix64 mix(seed);
  SplitMix64 rng(mix.Next() ^ (0xd1b54a32d192ed03ULL * (epoch + 1)));
  std::vector<std::uint64_t> perm(n);
  for (std::uint64_t i = 0; i < n; ++i) perm[i] = i;
  for (std::uint64_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[rng.Below(i)]);
  return perm;
}

absl::StatusOr<std::span<const std::uint64_t>> BatchOrder::Of(const session::RoundPlan& plan, std::uint64_t round,
                                                              std::uint64_t step) {
  const session::DataPosition at = plan.At(round);
  if (at.epoch != epoch_) {
    permutation_ = EpochPermutation(plan.samples, seed_, at.epoch);
    epoch_ = at.epoch;
  }
  const std::uint64_t b = plan.batch;
  const std::uint64_t first = at.position + (step * plan.workers + plan.rank) * b;
  if (first + b > permutation_.size()) {
    return absl::InternalError(absl::StrCat("round ", round, ": samples [", first, ", ", first + b,
                                            ") beyond the epoch's ", permutation_.size()));
  }
  return std::span<const std::uint64_t>(permutation_).subspan(first, b);
}

std::uint64_t StepsPerEpoch(std::uint64_t n, std::uint32_t world, std::uint64_t batch) {
  if (world == 0 || batch == 0) return 0;
  return n / (std::uint64_t{world} * batch);
}

absl::StatusOr<std::span<const std::uint64_t>> StepIndices(std::span<const std::uint64_t> permutation,
                                                           std::uint64_t step, std::uint32_t rank, std::uint32_t world,
                                                           std::uint64_t batch) {
  if (world == 0 || rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat("StepIndices: rank ", rank, " is not in [0, world = ", world, ")"));
  }
  if (batch == 0) return absl::InvalidArgumentError("StepIndices: batch is 0");
  const std::uint64_t steps = StepsPerEpoch(permutation.size(), world, batch);
  if (step >= steps) {
    return absl::InvalidArgumentError(absl::StrCat("StepIndices: step ", step, " >= steps per epoch ", steps, " (n = ",
                                                   permutation.size(), ", world = ", world, ", batch = ", batch, ")"));
  }
  return permutation.subspan(step * world * batch + rank * batch, batch);
}

absl::Status FillBatch(const Dataset& data, std::span<const std::uint64_t> indices, float* images,
                       std::int64_t* labels) {
  if (indices.empty()) return absl::InvalidArgumentError("FillBatch: no indices");
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] >= data.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("FillBatch: indices[", i, "] = ", indices[i], " >= dataset size ", data.size()));
    }
  }
  std::array<float, 256> lut;
  for (int v = 0; v < 256; ++v) lut[v] = (static_cast<float>(v) / 255.0f - kFashionMnistMean) / kFashionMnistStd;
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::uint8_t* src = data.images.data() + indices[i] * Dataset::kPixels;
    float* dst = images + i * Dataset::kPixels;
    for (std::int64_t p = 0; p < Dataset::kPixels; ++p) dst[p] = lut[src[p]];
    labels[i] = data.labels[indices[i]];
  }
  return absl::OkStatus();
}

}  // namespace sketchps::worker
