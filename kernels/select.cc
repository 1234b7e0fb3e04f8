// Selection kernels (see select.h). One Thrust source for the CPU (OpenMP) and CUDA backends.
#include "kernels/select.h"

#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/functional.h>
#include <thrust/gather.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/splitmix.h"
#include "common/status.h"
#include "kernels/internal/policy.h"
#include "kernels/internal/scratch_array.h"

namespace sketchps::kernels {
namespace {

using internal::Policy;
using internal::ScratchArray;

constexpr std::size_t kMaxSample = std::size_t{1} << 17;
constexpr std::uint64_t kTopKSampleSeed = 0x5EED70C4ull;

struct AbsOf {
  SKETCHPS_HD float operator()(float v) const { return fabsf(v); }
};
struct AbsAbove {
  float tau;
  SKETCHPS_HD bool operator()(float v) const { return fabsf(v) > tau; }
};
struct AbsAtLeast {
  float tau;
  SKETCHPS_HD bool operator()(float v) const { return fabsf(v) >= tau; }
};
// |x| at a pseudo-random position chosen by the sample number.
struct SampledAbs {
  const float* x;
  std::uint64_t n;
  std::uint64_t seed;
  SKETCHPS_HD float operator()(std::uint64_t s) const { return fabsf(x[SplitMix64(seed + s) % n]); }
};

absl::Status CheckInput(const float* d_x, std::size_t n, const char* fn) {
  if (n >= (std::size_t{1} << 32)) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": n = ", n, " exceeds the uint32 index range"));
  }
  if (n > 0 && d_x == nullptr) return absl::InvalidArgumentError(absl::StrCat(fn, ": input pointer is null"));
  return absl::OkStatus();
}

// Sorted (descending) |x| of a deterministic sample of m entries (all entries when m == n),
// returned at position `rank`.
float SampleRank(const float* d_x, std::size_t n, std::size_t m, std::size_t rank, std::uint64_t seed,
                 const Exec& exec) {
  ScratchArray<float> sample(*exec.scratch, m);
  if (m == n) {
    thrust::transform(Policy(exec), d_x, d_x + n, sample.data(), AbsOf{});
  } else {
    thrust::counting_iterator<std::uint64_t> s(0);
    thrust::transform(Policy(exec), s, s + m, sample.data(), SampledAbs{d_x, n, seed});
  }
  thrust::sort(Policy(exec), sample.data(), sample.data() + m, thrust::greater<float>());
  float value = 0.0f;
  CopyToHost(&value, sample.data() + std::min(rank, m - 1), sizeof(float));
  return value;
}

// A threshold tau with count(|x| >= tau) >= k, aiming at about 1.4k for small k/n.
float CandidateThreshold(const float* d_x, std::size_t n, std::size_t k, const Exec& exec) {
  if (k * 4 >= n) return 0.0f;  // selecting a large share: sampling would not pay off
  const std::size_t m = std::min(n, kMaxSample);
  const double expected = static_cast<double>(k) * static_cast<double>(m) / static_cast<double>(n);
  const auto rank = static_cast<std::size_t>(std::ceil(expected + 4.0 * std::sqrt(expected) + 8.0));
  return SampleRank(d_x, n, m, rank, kTopKSampleSeed, exec);
}

// Compacts (index, |x|) of every entry satisfying pred into the candidate arrays, index order.
template <class Pred>
void CompactCandidates(const float* d_x, std::size_t n, Pred pred, std::uint32_t* d_idx, float* d_key,
                       const Exec& exec) {
  thrust::counting_iterator<std::uint32_t> first(0);
  auto in = thrust::make_zip_iterator(thrust::make_tuple(first, thrust::make_transform_iterator(d_x, AbsOf{})));
  auto out = thrust::make_zip_iterator(thrust::make_tuple(d_idx, d_key));
  thrust::copy_if(Policy(exec), in, in + n, d_x, out, pred);
}

// Sorts candidates by magnitude (stable: equal magnitudes keep index order) and writes the top k.
void EmitTopK(const float* d_x, std::uint32_t* d_cidx, float* d_ckey, std::size_t count, std::size_t k,
              std::uint32_t* d_out_idx, float* d_out_val, const Exec& exec) {
  thrust::stable_sort_by_key(Policy(exec), d_ckey, d_ckey + count, d_cidx, thrust::greater<float>());
  thrust::copy(Policy(exec), d_cidx, d_cidx + k, d_out_idx);
  thrust::gather(Policy(exec), d_out_idx, d_out_idx + k, d_x, d_out_val);
}

}  // namespace

absl::StatusOr<std::size_t> TopK(const float* d_x, std::size_t n, std::size_t k, std::uint32_t* d_out_idx,
                                 float* d_out_val, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(CheckInput(d_x, n, "TopK"));
  k = std::min(k, n);
  if (k == 0) return std::size_t{0};
  if (d_out_idx == nullptr || d_out_val == nullptr) return absl::InvalidArgumentError("TopK: output pointer is null");

  float tau = CandidateThreshold(d_x, n, k, exec);
  std::size_t count = 0;
  if (tau > 0.0f) count = thrust::count_if(Policy(exec), d_x, d_x + n, AbsAtLeast{tau});
  if (count < k) {  // unlucky sample, or a threshold of zero: fall back to every nonzero entry
    tau = 0.0f;
    count = thrust::count_if(Policy(exec), d_x, d_x + n, AbsAbove{0.0f});
  }
  const bool with_zeros = count < k;  // fewer than k nonzeros: zeros rank by index after them
  if (with_zeros) count = thrust::count_if(Policy(exec), d_x, d_x + n, AbsAtLeast{0.0f});
  k = std::min(k, count);  // only NaN entries are never candidates
  if (k == 0) return std::size_t{0};

  ScratchArray<std::uint32_t> cidx(*exec.scratch, count);
  ScratchArray<float> ckey(*exec.scratch, count);
  if (with_zeros) {
    CompactCandidates(d_x, n, AbsAtLeast{0.0f}, cidx.data(), ckey.data(), exec);
  } else if (tau > 0.0f) {
    CompactCandidates(d_x, n, AbsAtLeast{tau}, cidx.data(), ckey.data(), exec);
  } else {
    CompactCandidates(d_x, n, AbsAbove{0.0f}, cidx.data(), ckey.data(), exec);
  }
  EmitTopK(d_x, cidx.data(), ckey.data(), count, k, d_out_idx, d_out_val, exec);
  return k;
}

absl::StatusOr<std::size_t> CountAbove(const float* d_x, std::size_t n, float tau, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(CheckInput(d_x, n, "CountAbove"));
  if (n == 0) return std::size_t{0};
  return static_cast<std::size_t>(thrust::count_if(Policy(exec), d_x, d_x + n, AbsAbove{tau}));
}

absl::StatusOr<std::size_t> ThresholdSelect(const float* d_x, std::size_t n, float tau, std::size_t capacity,
                                            std::uint32_t* d_out_idx, float* d_out_val, const Exec& exec) {
  SKETCHPS_ASSIGN_OR_RETURN(const std::size_t count, CountAbove(d_x, n, tau, exec));
  if (count > capacity) {
    return absl::ResourceExhaustedError(
        absl::StrCat("ThresholdSelect: ", count, " entries exceed |x| > ", tau, " but capacity is ", capacity));
  }
  if (count == 0) return count;
  if (d_out_idx == nullptr || d_out_val == nullptr) {
    return absl::InvalidArgumentError("ThresholdSelect: output pointer is null");
  }
  thrust::counting_iterator<std::uint32_t> first(0);
  auto in = thrust::make_zip_iterator(thrust::make_tuple(first, d_x));
  auto out = thrust::make_zip_iterator(thrust::make_tuple(d_out_idx, d_out_val));
  thrust::copy_if(Policy(exec), in, in + n, d_x, out, AbsAbove{tau});
  return count;
}

absl::StatusOr<float> SampledMagnitudeQuantile(const float* d_x, std::size_t n, double fraction,
                                               std::size_t sample_size, std::uint64_t seed, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(CheckInput(d_x, n, "SampledMagnitudeQuantile"));
  if (n == 0) return absl::InvalidArgumentError("SampledMagnitudeQuantile: empty input");
  if (!(fraction >= 0.0 && fraction <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("SampledMagnitudeQuantile: fraction ", fraction, " not in [0, 1]"));
  }
  const std::size_t m = sample_size == 0 ? n : std::min(sample_size, n);
  const auto rank = static_cast<std::size_t>(fraction * static_cast<double>(m));
  return SampleRank(d_x, n, m, rank, seed, exec);
}

}  // namespace sketchps::kernels
