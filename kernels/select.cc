// Selection kernels (see select.h). One Thrust source for the CPU (OpenMP) and CUDA backends.
#include "kernels/select.h"

#include <algorithm>
#include <cmath>

#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/gather.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

#include "absl/strings/str_cat.h"
#include "common/splitmix.h"
#include "common/status.h"
#include "kernels/internal/chunked_select.h"
#include "kernels/internal/device_reduce.h"
#include "kernels/internal/pointer_check.h"
#include "kernels/internal/policy.h"
#include "kernels/internal/scratch_array.h"

#if SKETCHPS_KERNELS_CUDA
#include <cub/device/device_select.cuh>
#endif

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
// |x| at a pseudo-random position chosen by the sample number.
struct SampledAbs {
  const float* x;
  std::uint64_t n;
  std::uint64_t seed;
  SKETCHPS_HD float operator()(std::uint64_t s) const { return fabsf(x[SplitMix64(seed + s) % n]); }
};

absl::Status CheckInput(const float* d_x, std::size_t n, const Exec& exec, const char* fn) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExec(fn, exec));
  if (n >= (std::size_t{1} << 32)) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": n = ", n, " exceeds the uint32 index range"));
  }
  if (n > 0 && d_x == nullptr) return absl::InvalidArgumentError(absl::StrCat(fn, ": input pointer is null"));
  return internal::CheckDevicePointer(fn, "d_x", d_x, n);
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

// Sorts candidates by magnitude (stable: equal magnitudes keep index order) and writes the top k.
void EmitTopK(const float* d_x, std::uint32_t* d_cidx, float* d_ckey, std::size_t count, std::size_t k,
              std::uint32_t* d_out_idx, float* d_out_val, const Exec& exec) {
  thrust::stable_sort_by_key(Policy(exec), d_ckey, d_ckey + count, d_cidx, thrust::greater<float>());
  thrust::copy(Policy(exec), d_cidx, d_cidx + k, d_out_idx);
  thrust::gather(Policy(exec), d_out_idx, d_out_idx + k, d_x, d_out_val);
}

// OK when the segments are sorted, disjoint and inside [0, n).
// The device memory checks of a selection's outputs (null was checked before).
absl::Status CheckOutputs(const char* fn, const std::uint32_t* d_out_idx, const float* d_out_val, std::size_t count) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(fn, "d_out_idx", d_out_idx, count));
  return internal::CheckDevicePointer(fn, "d_out_val", d_out_val, count);
}

absl::Status CheckSegments(const std::vector<ThresholdSegment>& segments, std::size_t n) {
  std::uint64_t previous_end = 0;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    const auto& seg = segments[s];
    if (seg.offset < previous_end || seg.offset + seg.size > n) {
      return absl::InvalidArgumentError(absl::StrCat("ThresholdSelect: segment ", s, " [", seg.offset, ", ",
                                                     seg.offset + seg.size, ") overlaps its predecessor or leaves [0, ",
                                                     n, ")"));
    }
    previous_end = seg.offset + seg.size;
  }
  return absl::OkStatus();
}

#if !SKETCHPS_KERNELS_CUDA
// Splits checked segments into chunks that never cross a segment boundary.
std::vector<internal::ChunkSpec> MakeChunks(const std::vector<ThresholdSegment>& segments) {
  std::vector<internal::ChunkSpec> chunks;
  for (const auto& seg : segments) internal::AppendChunks(seg.offset, seg.size, seg.tau, chunks);
  return chunks;
}

// Threshold selection over checked segments: Count() once, then Write() the entries, in index
// order, into buffers of Count() elements. CPU: over chunks (internal/chunked_select.h).
template <bool kInclusive>
class Selection {
 public:
  Selection(const float* d_x, std::size_t /*n*/, const std::vector<ThresholdSegment>& segments, const Exec& exec)
      : Selection(d_x, MakeChunks(segments), exec) {}
  Selection(const float* d_x, const std::vector<internal::ChunkSpec>& chunks, const Exec& exec)
      : d_x_(d_x),
        n_chunks_(chunks.size()),
        exec_(exec),
        chunks_(*exec.scratch, chunks.size()),
        counts_(*exec.scratch, chunks.size()) {
    CopyToDevice(chunks_.data(), chunks.data(), chunks.size() * sizeof(internal::ChunkSpec));
  }

  std::size_t Count() {
    if (n_chunks_ == 0) return 0;
    thrust::counting_iterator<std::size_t> first(0);
    thrust::transform(Policy(exec_), first, first + n_chunks_, counts_.data(),
                      internal::CountChunkAbove<kInclusive>{d_x_, chunks_.data()});
    return static_cast<std::size_t>(thrust::reduce(Policy(exec_), counts_.data(), counts_.data() + n_chunks_,
                                                   std::uint64_t{0}, thrust::plus<std::uint64_t>()));
  }

  void Write(std::size_t limit, std::uint32_t* d_idx, float* d_val) {
    if (n_chunks_ == 0) return;
    thrust::exclusive_scan(Policy(exec_), counts_.data(), counts_.data() + n_chunks_, counts_.data());
    thrust::counting_iterator<std::size_t> first(0);
    thrust::for_each(Policy(exec_), first, first + n_chunks_,
                     internal::WriteChunkAbove<kInclusive>{d_x_, chunks_.data(), counts_.data(), limit, d_idx, d_val});
  }

 private:
  const float* d_x_;
  std::size_t n_chunks_;
  const Exec& exec_;
  ScratchArray<internal::ChunkSpec> chunks_;
  ScratchArray<std::uint32_t> counts_;
};

#else  // CUDA: one counting pass, then cub's DeviceSelect::If over the indices and a gather.

struct SegmentSpec {
  std::uint64_t begin;
  std::uint64_t end;
  float tau;
};

// Whether entry i lies in a segment and its magnitude qualifies there (binary search over the
// sorted segments; NaN never qualifies).
template <bool kInclusive>
struct SegmentQualifies {
  const float* x;
  const SegmentSpec* segs;
  std::uint32_t count;
  SKETCHPS_HD bool operator()(std::uint32_t i) const {
    std::uint32_t lo = 0, hi = count;  // first segment that begins after i
    while (lo < hi) {
      const std::uint32_t mid = (lo + hi) / 2;
      if (segs[mid].begin <= i) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    if (lo == 0) return false;
    const SegmentSpec s = segs[lo - 1];
    return i < s.end && internal::Qualifies<kInclusive>(fabsf(x[i]), s.tau);
  }
};
template <bool kInclusive>
struct CountQualifying {
  SegmentQualifies<kInclusive> q;
  SKETCHPS_HD std::uint64_t operator()(std::size_t i) const { return q(static_cast<std::uint32_t>(i)) ? 1 : 0; }
};

template <bool kInclusive>
class Selection {
 public:
  Selection(const float* d_x, std::size_t n, const std::vector<ThresholdSegment>& segments, const Exec& exec)
      : n_(n), exec_(exec), segs_(*exec.scratch, segments.size()) {
    std::vector<SegmentSpec> specs;
    for (const auto& seg : segments) specs.push_back({seg.offset, seg.offset + seg.size, seg.tau});
    CopyToDevice(segs_.data(), specs.data(), specs.size() * sizeof(SegmentSpec));
    q_ = SegmentQualifies<kInclusive>{d_x, segs_.data(), static_cast<std::uint32_t>(specs.size())};
  }

  std::size_t Count() {
    if (segs_.size() == 0) return 0;
    return static_cast<std::size_t>(internal::DeviceSumIndices(n_, CountQualifying<kInclusive>{q_}, exec_));
  }

  // limit: Count(), which DeviceSelect writes exactly.
  void Write(std::size_t limit, std::uint32_t* d_idx, float* d_val) {
    if (limit == 0) return;
    const auto stream = static_cast<cudaStream_t>(exec_.stream);
    ScratchArray<std::uint64_t> selected(*exec_.scratch, 1);
    thrust::counting_iterator<std::uint32_t> first(0);
    std::size_t bytes = 0;
    internal::CudaCheck(
        cub::DeviceSelect::If(nullptr, bytes, first, d_idx, selected.data(), static_cast<std::int64_t>(n_), q_, stream),
        "DeviceSelect::If");
    ScratchArray<char> temp(*exec_.scratch, std::max<std::size_t>(bytes, 1));  // a null buffer is a size query
    internal::CudaCheck(cub::DeviceSelect::If(temp.data(), bytes, first, d_idx, selected.data(),
                                              static_cast<std::int64_t>(n_), q_, stream),
                        "DeviceSelect::If");
    thrust::gather(Policy(exec_), d_idx, d_idx + limit, q_.x, d_val);
  }

 private:
  std::size_t n_;
  const Exec& exec_;
  ScratchArray<SegmentSpec> segs_;
  SegmentQualifies<kInclusive> q_{};
};
#endif

std::vector<ThresholdSegment> WholeRange(std::size_t n, float tau) { return {ThresholdSegment{0, n, tau}}; }

// Candidates (index, |x|) of every entry with |x| >= tau (inclusive) or > tau, in index order.
template <bool kInclusive>
void CollectCandidates(Selection<kInclusive>& sel, std::size_t count, std::uint32_t* d_idx, float* d_key,
                       const Exec& exec) {
  sel.Write(count, d_idx, d_key);
  thrust::transform(Policy(exec), d_key, d_key + count, d_key, AbsOf{});
}

// Sorts the `count` candidates of `sel` and writes the top min(k, count).
template <bool kInclusive>
std::size_t FinishTopK(Selection<kInclusive>& sel, std::size_t count, std::size_t k, const float* d_x,
                       std::uint32_t* d_out_idx, float* d_out_val, const Exec& exec) {
  k = std::min(k, count);
  if (k == 0) return 0;
  ScratchArray<std::uint32_t> cidx(*exec.scratch, count);
  ScratchArray<float> ckey(*exec.scratch, count);
  CollectCandidates(sel, count, cidx.data(), ckey.data(), exec);
  EmitTopK(d_x, cidx.data(), ckey.data(), count, k, d_out_idx, d_out_val, exec);
  return k;
}

}  // namespace

absl::StatusOr<std::size_t> TopK(const float* d_x, std::size_t n, std::size_t k, std::uint32_t* d_out_idx,
                                 float* d_out_val, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(CheckInput(d_x, n, exec, "TopK"));
  k = std::min(k, n);
  if (k == 0) return std::size_t{0};
  if (d_out_idx == nullptr || d_out_val == nullptr) return absl::InvalidArgumentError("TopK: output pointer is null");
  SKETCHPS_RETURN_IF_ERROR(CheckOutputs("TopK", d_out_idx, d_out_val, k));
  const float tau = CandidateThreshold(d_x, n, k, exec);
  if (tau > 0.0f) {
    Selection<true> sampled(d_x, n, WholeRange(n, tau), exec);
    const std::size_t count = sampled.Count();
    if (count >= k) return FinishTopK(sampled, count, k, d_x, d_out_idx, d_out_val, exec);
  }
  // Unlucky sample, or a threshold of zero: every nonzero entry is a candidate.
  Selection<false> nonzero(d_x, n, WholeRange(n, 0.0f), exec);
  const std::size_t count = nonzero.Count();
  if (count >= k) return FinishTopK(nonzero, count, k, d_x, d_out_idx, d_out_val, exec);
  // Fewer than k nonzeros: zeros rank by index after them (NaN never qualifies).
  Selection<true> all(d_x, n, WholeRange(n, 0.0f), exec);
  return FinishTopK(all, all.Count(), k, d_x, d_out_idx, d_out_val, exec);
}

absl::StatusOr<std::size_t> CountAbove(const float* d_x, std::size_t n, float tau, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(CheckInput(d_x, n, exec, "CountAbove"));
  if (n == 0) return std::size_t{0};
  return static_cast<std::size_t>(thrust::count_if(Policy(exec), d_x, d_x + n, AbsAbove{tau}));
}

absl::StatusOr<std::size_t> ThresholdSelect(const float* d_x, std::size_t n, float tau, std::size_t capacity,
                                            std::uint32_t* d_out_idx, float* d_out_val, const Exec& exec) {
  return ThresholdSelectSegments(d_x, n, {ThresholdSegment{0, n, tau}}, capacity, d_out_idx, d_out_val, exec);
}

absl::StatusOr<std::size_t> ThresholdSelectSegments(const float* d_x, std::size_t n,
                                                    const std::vector<ThresholdSegment>& segments, std::size_t capacity,
                                                    std::uint32_t* d_out_idx, float* d_out_val, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(CheckInput(d_x, n, exec, "ThresholdSelect"));
  SKETCHPS_RETURN_IF_ERROR(CheckSegments(segments, n));
  Selection<false> sel(d_x, n, segments, exec);
  const std::size_t total = sel.Count();
  if (total > capacity) {
    return absl::ResourceExhaustedError(
        absl::StrCat("ThresholdSelect: ", total, " entries exceed their threshold but capacity is ", capacity));
  }
  if (total == 0) return total;
  if (d_out_idx == nullptr || d_out_val == nullptr) {
    return absl::InvalidArgumentError("ThresholdSelect: output pointer is null");
  }
  SKETCHPS_RETURN_IF_ERROR(CheckOutputs("ThresholdSelect", d_out_idx, d_out_val, total));
  sel.Write(total, d_out_idx, d_out_val);
  return total;
}

absl::StatusOr<float> SampledMagnitudeQuantile(const float* d_x, std::size_t n, double fraction,
                                               std::size_t sample_size, std::uint64_t seed, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(CheckInput(d_x, n, exec, "SampledMagnitudeQuantile"));
  if (n == 0) return absl::InvalidArgumentError("SampledMagnitudeQuantile: empty input");
  if (!(fraction >= 0.0 && fraction <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("SampledMagnitudeQuantile: fraction ", fraction, " not in [0, 1]"));
  }
  const std::size_t m = sample_size == 0 ? n : std::min(sample_size, n);
  const auto rank = static_cast<std::size_t>(fraction * static_cast<double>(m));
  return SampleRank(d_x, n, m, rank, seed, exec);
}

}  // namespace sketchps::kernels
