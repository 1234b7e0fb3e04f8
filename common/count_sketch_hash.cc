// Count Sketch hash family: parameter validation and coefficient drawing (see count_sketch_hash.h).
#include "common/count_sketch_hash.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "common/splitmix.h"

namespace sketchps {
namespace {

// Uniform in [0, p): the top 61 bits of a splitmix64 output, rejecting the single value p.
std::uint64_t UniformBelowMersenne61(SplitMix64Rng& rng) {
  for (;;) {
    const std::uint64_t v = rng.Next() >> 3;
    if (v < kMersenne61) return v;
  }
}

}  // namespace

absl::Status CountSketchParams::Validate() const {
  if (rows < 1 || rows > kMaxSketchRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("CountSketchParams.rows = ", rows, " is not in [1, ", kMaxSketchRows, "]"));
  }
  if (cols < 1) return absl::InvalidArgumentError("CountSketchParams.cols = 0; need at least one column");
  if (Cells() > kMaxSketchCells) {
    return absl::InvalidArgumentError(absl::StrCat("CountSketchParams.cols = ", cols, " with rows = ", rows, " gives ",
                                                   Cells(), " table cells, above the limit of ", kMaxSketchCells,
                                                   " (1 GiB of float32)"));
  }
  if (family != CountSketchFamily::kPolynomial61 && family != CountSketchFamily::kSplitMix64) {
    return absl::InvalidArgumentError(absl::StrCat("CountSketchParams.family = ", static_cast<std::uint32_t>(family),
                                                   " is not a known hash family (0 or 1)"));
  }
  if (dim >= kMaxSketchDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("CountSketchParams.dim = ", dim, " is not below 2^32 (coordinates are uint32)"));
  }
  return absl::OkStatus();
}

std::uint64_t CountSketchRowSeed(std::uint64_t seed, std::uint32_t row) { return SplitMix64(seed ^ SplitMix64(row)); }

absl::StatusOr<CountSketchHash> CountSketchHash::Create(const CountSketchParams& params) {
  if (absl::Status status = params.Validate(); !status.ok()) return status;
  CountSketchHash hash;
  hash.rows_ = params.rows;
  hash.cols_ = params.cols;
  hash.seed_ = params.seed;
  hash.dim_ = params.dim;
  hash.family_ = params.family;
  hash.cols_magic_ = std::numeric_limits<std::uint64_t>::max() / params.cols;
  for (std::uint32_t row = 0; row < params.rows; ++row) {
    SplitMix64Rng rng(CountSketchRowSeed(params.seed, row));
    if (params.family == CountSketchFamily::kSplitMix64) {
      hash.coef_[row][0] = rng.Next();
    } else {
      for (std::uint64_t& c : hash.coef_[row]) c = UniformBelowMersenne61(rng);
    }
  }
  return hash;
}

std::uint64_t SketchSeed(std::uint64_t job_seed, std::uint32_t shard_id) {
  return SplitMix64(SplitMix64(job_seed) ^ (0xD1B54A32D192ED03ull * (std::uint64_t{shard_id} + 1)));
}

}  // namespace sketchps
