// Statistics kernels (see stats.h). One Thrust source for the CPU (OpenMP) and CUDA backends.
#include "kernels/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/internal/chunked_select.h"
#include "kernels/internal/pointer_check.h"
#include "kernels/internal/policy.h"
#include "kernels/internal/scratch_array.h"

namespace sketchps::kernels {
namespace {

using internal::Policy;

// Partial moments of a set of exceedances; the reduction is associative and commutative.
struct Moments {
  unsigned long long count;
  double sum;
  double sum_sq;
  double sum_log;
  double min;
  double max;
};

SKETCHPS_HD inline Moments EmptyMoments() { return Moments{0ull, 0.0, 0.0, 0.0, INFINITY, -INFINITY}; }

// Template flags of the optional moments (MomentSet).
constexpr unsigned kSumSqFlag = 1, kSumLogFlag = 2, kMinMaxFlag = 4;

template <unsigned kFlags>
struct MergeMoments {
  SKETCHPS_HD Moments operator()(const Moments& a, const Moments& b) const {
    constexpr bool kSq = (kFlags & kSumSqFlag) != 0, kLog = (kFlags & kSumLogFlag) != 0;
    constexpr bool kMinMax = (kFlags & kMinMaxFlag) != 0;
    return Moments{a.count + b.count,
                   a.sum + b.sum,
                   kSq ? a.sum_sq + b.sum_sq : 0.0,
                   kLog ? a.sum_log + b.sum_log : 0.0,
                   kMinMax ? (a.min < b.min ? a.min : b.min) : 0.0,
                   kMinMax ? (a.max > b.max ? a.max : b.max) : 0.0};
  }
};

// Stand-in for +-inf in the branch-free min/max (inf * 0 would be NaN); far above any float magnitude.
constexpr double kFar = 1e300;

// ln z for a kept entry, 0 for an excluded one (whose z is 0).
SKETCHPS_HD inline double KeptLog(double z, double keep) { return keep != 0.0 ? log(z) : 0.0; }

// The moments contributed by one entry. kBranchFree: arithmetic instead of a data-dependent branch.
// Where a sizeable fraction of entries, in random positions, exceeds eta (a SIDCo stage keeps 25% or
// less), the branch mispredicts so often that the pass costs about five streaming passes on a CPU,
// against at most 2.6 for the branch-free form at every eta; where almost every entry is kept
// (eta <= 0: all, or all nonzero), the branch is predictable and cheaper. In the branch-free form,
// excluded entries add 0 to the sums and kFar to the min (subtract it from the max); the host maps
// min/max back to +-inf when count == 0. NaN entries count as kept and propagate.
template <unsigned kFlags, bool kBranchFree>
struct ExceedanceTerm {
  float eta;     // entries with !(|x| <= eta) count
  double shift;  // max(eta, 0)
  SKETCHPS_HD Moments operator()(float v) const {
    constexpr bool kSq = (kFlags & kSumSqFlag) != 0, kLog = (kFlags & kSumLogFlag) != 0;
    constexpr bool kMinMax = (kFlags & kMinMaxFlag) != 0;
    const float a = fabsf(v);
    if (kBranchFree) {
      const bool kept = !(a <= eta);
      const double keep = static_cast<double>(kept);  // a conversion, not a select: stays branch-free
      const double z = (static_cast<double>(a) - shift) * keep;
      const double far = kMinMax ? (1.0 - keep) * kFar : 0.0;
      return Moments{static_cast<unsigned long long>(kept), z,       kSq ? z * z : 0.0,
                     kLog ? KeptLog(z, keep) : 0.0,         z + far, z - far};
    }
    if (a <= eta) return EmptyMoments();
    const double z = static_cast<double>(a) - shift;
    return Moments{1ull, z, kSq ? z * z : 0.0, kLog ? log(z) : 0.0, z, z};
  }
};

template <unsigned kFlags>
Moments ReduceExceedances(const float* d_x, std::size_t n, float eta, double shift, const Exec& exec) {
  if (eta > 0.0f) {
    return thrust::transform_reduce(Policy(exec), d_x, d_x + n, ExceedanceTerm<kFlags, true>{eta, shift},
                                    EmptyMoments(), MergeMoments<kFlags>{});
  }
  return thrust::transform_reduce(Policy(exec), d_x, d_x + n, ExceedanceTerm<kFlags, false>{eta, shift}, EmptyMoments(),
                                  MergeMoments<kFlags>{});
}

Moments DispatchExceedances(unsigned flags, const float* d_x, std::size_t n, float eta, double shift,
                            const Exec& exec) {
  switch (flags) {
    case 0: return ReduceExceedances<0>(d_x, n, eta, shift, exec);
    case 1: return ReduceExceedances<1>(d_x, n, eta, shift, exec);
    case 2: return ReduceExceedances<2>(d_x, n, eta, shift, exec);
    case 3: return ReduceExceedances<3>(d_x, n, eta, shift, exec);
    case 4: return ReduceExceedances<4>(d_x, n, eta, shift, exec);
    case 5: return ReduceExceedances<5>(d_x, n, eta, shift, exec);
    case 6: return ReduceExceedances<6>(d_x, n, eta, shift, exec);
    default: return ReduceExceedances<7>(d_x, n, eta, shift, exec);
  }
}

// Σx and Σx² of signed values.
struct SumSq {
  double sum;
  double sum_sq;
};
struct MergeSumSq {
  SKETCHPS_HD SumSq operator()(const SumSq& a, const SumSq& b) const {
    return SumSq{a.sum + b.sum, a.sum_sq + b.sum_sq};
  }
};
// Σx and Σx² of one chunk (chunks never cross a segment boundary).
struct ChunkSumSq {
  const float* x;
  const internal::ChunkSpec* chunks;
  SKETCHPS_HD SumSq operator()(std::size_t c) const {
    const internal::ChunkSpec chunk = chunks[c];
    const float* v = x + chunk.begin;
    const int len = static_cast<int>(chunk.len);
    double sum = 0.0;
    double sum_sq = 0.0;
#if !SKETCHPS_KERNELS_CUDA
#pragma omp simd reduction(+ : sum, sum_sq)
#endif
    for (int i = 0; i < len; ++i) {
      const double d = static_cast<double>(v[i]);
      sum += d;
      sum_sq += d * d;
    }
    return SumSq{sum, sum_sq};
  }
};

// Chunks of every segment, and for each chunk its segment.
void SplitIntoChunks(const std::vector<Segment>& segments, std::vector<internal::ChunkSpec>& chunks,
                     std::vector<std::size_t>& owner) {
  for (std::size_t l = 0; l < segments.size(); ++l) {
    internal::AppendChunks(segments[l].offset, segments[l].size, 0.0f, chunks);
    owner.resize(chunks.size(), l);
  }
}

absl::Status CheckInput(const float* d_x, std::size_t n, const Exec& exec, const char* fn) {
  return internal::CheckExecAndPointer(fn, exec, "d_x", d_x, n);
}

}  // namespace

absl::StatusOr<SampleMoments> ExceedanceStats(const float* d_x, std::size_t n, float eta, MomentSet moments,
                                              const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(CheckInput(d_x, n, exec, "ExceedanceStats"));
  if (std::isnan(eta)) return absl::InvalidArgumentError("ExceedanceStats: eta is NaN");
  const double shift = eta > 0.0f ? static_cast<double>(eta) : 0.0;
  const unsigned flags =
      (moments.sum_sq ? kSumSqFlag : 0u) | (moments.sum_log ? kSumLogFlag : 0u) | (moments.min_max ? kMinMaxFlag : 0u);
  const Moments m = n > 0 ? DispatchExceedances(flags, d_x, n, eta, shift, exec) : EmptyMoments();
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  SampleMoments out;
  out.count = m.count;
  out.sum = m.sum;
  out.sum_sq = moments.sum_sq ? m.sum_sq : kNaN;
  out.sum_log = moments.sum_log ? m.sum_log : kNaN;
  out.min = !moments.min_max ? kNaN : (m.count ? m.min : kInf);
  out.max = !moments.min_max ? kNaN : (m.count ? m.max : -kInf);
  return out;
}

absl::StatusOr<std::vector<MeanStd>> SegmentMeanStd(const float* d_x, std::size_t n,
                                                    const std::vector<Segment>& segments, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(CheckInput(d_x, n, exec, "SegmentMeanStd"));
  for (std::size_t l = 0; l < segments.size(); ++l) {
    const Segment& s = segments[l];
    if (s.offset > n || s.size > n - s.offset) {
      return absl::InvalidArgumentError(absl::StrCat("SegmentMeanStd: segments[", l, "] = {offset ", s.offset,
                                                     ", size ", s.size, "} exceeds the input length ", n));
    }
  }
  // One parallel pass over all chunks (not one per segment: on a loaded machine every parallel region
  // costs a scheduling round trip), then the per-segment sums on the host in chunk order.
  std::vector<internal::ChunkSpec> chunks;
  std::vector<std::size_t> owner;
  SplitIntoChunks(segments, chunks, owner);
  std::vector<SumSq> partial(chunks.size());
  if (!chunks.empty()) {
    internal::ScratchArray<internal::ChunkSpec> d_chunks(*exec.scratch, chunks.size());
    internal::ScratchArray<SumSq> d_partial(*exec.scratch, chunks.size());
    CopyToDevice(d_chunks.data(), chunks.data(), chunks.size() * sizeof(internal::ChunkSpec));
    thrust::counting_iterator<std::size_t> first(0);
    thrust::transform(Policy(exec), first, first + chunks.size(), d_partial.data(), ChunkSumSq{d_x, d_chunks.data()});
    CopyToHost(partial.data(), d_partial.data(), partial.size() * sizeof(SumSq));
  }
  std::vector<SumSq> acc(segments.size(), SumSq{0.0, 0.0});
  for (std::size_t c = 0; c < chunks.size(); ++c) acc[owner[c]] = MergeSumSq{}(acc[owner[c]], partial[c]);
  std::vector<MeanStd> out(segments.size());
  for (std::size_t l = 0; l < segments.size(); ++l) {
    if (segments[l].size == 0) continue;
    const double count = static_cast<double>(segments[l].size);
    const double mean = acc[l].sum / count;
    const double var = acc[l].sum_sq / count - mean * mean;
    out[l] = MeanStd{mean, std::sqrt(var < 0.0 ? 0.0 : var)};  // NaN input stays NaN
  }
  return out;
}

}  // namespace sketchps::kernels
