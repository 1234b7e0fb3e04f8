// DGC sampled-threshold selection (see dgc.h). One Thrust source for the CPU (OpenMP) and CUDA
// backends.
//
// Cost, for the common case where the sampled threshold lands within the bounds: a gather of
// ~1% of the entries, a selection on that sample, one counting pass and one writing pass over d_v.
// Thrust's copy_if is not used for the compaction: on the OpenMP backend it is the generic
// flags + scan + scatter, with two n-sized temporaries. Instead each counting pass records per-chunk
// counts for two thresholds (τ and τ·lower, the next "too few" step), so the writing pass knows
// every chunk's output offset and no adaptation step that lowers τ once costs an extra pass.
#include "kernels/dgc.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sort.h>
#include <thrust/transform.h>
#include <thrust/transform_scan.h>

#include "absl/strings/str_cat.h"
#include "common/splitmix.h"
#include "common/status.h"
#include "kernels/internal/chunked_select.h"
#include "kernels/internal/pointer_check.h"
#include "kernels/internal/policy.h"
#include "kernels/internal/scratch_array.h"
#include "kernels/select.h"
#include "kernels/sparse.h"

namespace sketchps::kernels {
namespace {

using internal::Policy;
using internal::ScratchArray;

// Chunks of the counting and writing passes: internal::kSelectChunk entries (chunked_select.h).
constexpr std::size_t kChunk = internal::kSelectChunk;
// The writing pass first takes a (vectorizable) max over blocks this long and scans only blocks
// that hold a selected entry.
constexpr std::size_t kBlock = 32;

// |x| with NaN mapped to 0, so the sample always has a strict weak order.
SKETCHPS_HD inline float Importance(float x) {
  const float a = fabsf(x);
  return a == a ? a : 0.0f;
}

struct StridedSample {
  const float* v;
  std::size_t start;
  std::size_t stride;
  SKETCHPS_HD float operator()(std::size_t s) const { return Importance(v[start + s * stride]); }
};
struct UniformSample {
  const float* v;
  std::uint64_t n;
  std::uint64_t seed;
  SKETCHPS_HD float operator()(std::uint64_t s) const { return Importance(v[SplitMix64(seed + 1 + s) % n]); }
};

// Per chunk: (#{|v| >= tau_a} << 32) | #{|v| >= tau_b}. A chunk count is < 2^32 and so is a total
// (n < 2^32), so packed sums never carry from the low half into the high half.
struct CountChunk {
  const float* v;
  std::size_t n;
  float tau_a;
  float tau_b;
  SKETCHPS_HD std::uint64_t operator()(std::size_t c) const {
    const std::size_t begin = c * kChunk;
    const std::size_t end = n - begin < kChunk ? n : begin + kChunk;
    const float* x = v + begin;  // locals and an int index let the host compiler vectorize
    const int len = static_cast<int>(end - begin);
    const float ta = tau_a;
    const float tb = tau_b;
    int count_a = 0;
    int count_b = 0;
#if !SKETCHPS_KERNELS_CUDA
#pragma omp simd reduction(+ : count_a, count_b)
#endif
    for (int i = 0; i < len; ++i) {
      const float a = fabsf(x[i]);
      count_a += a >= ta ? 1 : 0;
      count_b += a >= tb ? 1 : 0;
    }
    return (static_cast<std::uint64_t>(count_a) << 32) | static_cast<std::uint32_t>(count_b);
  }
};
struct HalfOf {
  unsigned shift;
  SKETCHPS_HD std::uint32_t operator()(std::uint64_t packed) const {
    return static_cast<std::uint32_t>(packed >> shift);
  }
};
// Writes the chunk's entries with |v| >= tau from output position offsets[c] on, dropping those at
// positions >= limit.
struct WriteChunk {
  const float* v;
  std::size_t n;
  float tau;
  const std::uint32_t* offsets;
  std::size_t limit;
  std::uint32_t* out_idx;
  float* out_val;
  SKETCHPS_HD void operator()(std::size_t c) const {
    const std::size_t begin = c * kChunk;
    const std::size_t end = n - begin < kChunk ? n : begin + kChunk;
    internal::WriteRangeAbove</*kInclusive=*/true, kBlock>(v, begin, end, tau, offsets[c], limit, out_idx, out_val);
  }
};

// Counts #{|v| >= tau}, one pass per call except when tau was the second threshold of the last pass.
// Keeps the last pass's per-chunk counts so that Write needs no further counting.
class ThresholdCounter {
 public:
  ThresholdCounter(const float* d_v, std::size_t n, float lower_step, const Exec& exec)
      : d_v_(d_v),
        n_(n),
        chunks_((n + kChunk - 1) / kChunk),
        lower_step_(lower_step),
        exec_(exec),
        packed_(*exec.scratch, chunks_) {}

  std::size_t Count(float tau) {
    if (valid_ && tau == tau_a_) return count_a_;
    if (valid_ && tau == tau_b_) return count_b_;
    tau_a_ = tau;
    tau_b_ = tau * lower_step_;
    thrust::counting_iterator<std::size_t> first(0);
    thrust::transform(Policy(exec_), first, first + chunks_, packed_.data(), CountChunk{d_v_, n_, tau_a_, tau_b_});
    const std::uint64_t totals = thrust::reduce(Policy(exec_), packed_.data(), packed_.data() + chunks_,
                                                std::uint64_t{0}, thrust::plus<std::uint64_t>());
    count_a_ = static_cast<std::size_t>(totals >> 32);
    count_b_ = static_cast<std::size_t>(totals & 0xffffffffu);
    valid_ = true;
    return count_a_;
  }

  // Writes the first min(limit, Count(tau)) entries with |v| >= tau, in index order.
  void Write(float tau, std::size_t limit, std::uint32_t* d_out_idx, float* d_out_val) {
    Count(tau);
    const unsigned shift = tau == tau_a_ ? 32u : 0u;
    ScratchArray<std::uint32_t> offsets(*exec_.scratch, chunks_);
    thrust::transform_exclusive_scan(Policy(exec_), packed_.data(), packed_.data() + chunks_, offsets.data(),
                                     HalfOf{shift}, std::uint32_t{0}, thrust::plus<std::uint32_t>());
    thrust::counting_iterator<std::size_t> first(0);
    thrust::for_each(Policy(exec_), first, first + chunks_,
                     WriteChunk{d_v_, n_, tau, offsets.data(), limit, d_out_idx, d_out_val});
  }

 private:
  const float* d_v_;
  std::size_t n_;
  std::size_t chunks_;
  float lower_step_;
  const Exec& exec_;
  ScratchArray<std::uint64_t> packed_;
  bool valid_ = false;
  float tau_a_ = 0.0f;
  float tau_b_ = 0.0f;
  std::size_t count_a_ = 0;
  std::size_t count_b_ = 0;
};

// The value of rank `rank` (0-based, descending) of d_s[0..len); reorders d_s.
float KthLargest(float* d_s, std::size_t len, std::size_t rank, const Exec& exec) {
#if SKETCHPS_KERNELS_CUDA
  thrust::sort(Policy(exec), d_s, d_s + len, thrust::greater<float>());
  float value = 0.0f;
  CopyToHost(&value, d_s + rank, sizeof(float));
  return value;
#else
  // CPU backend: device memory is host memory, and an O(len) selection beats Thrust's merge sort.
  std::nth_element(d_s, d_s + rank, d_s + len, std::greater<float>());
  return d_s[rank];
#endif
}

// τ: the plan.top_k_samples-th largest sampled importance.
float SampleThreshold(const float* d_v, std::size_t n, const DgcPlan& plan, bool strided, std::uint64_t seed,
                      const Exec& exec) {
  const bool whole = plan.num_samples == n;
  const std::size_t start = whole || !strided ? 0 : SplitMix64(seed) % plan.stride;
  const std::size_t len = whole || !strided ? plan.num_samples : (n - start + plan.stride - 1) / plan.stride;
  ScratchArray<float> sample(*exec.scratch, len);
  thrust::counting_iterator<std::size_t> first(0);
  if (whole || strided) {
    thrust::transform(Policy(exec), first, first + len, sample.data(),
                      StridedSample{d_v, start, whole ? 1 : plan.stride});
  } else {
    thrust::transform(Policy(exec), first, first + len, sample.data(), UniformSample{d_v, n, seed});
  }
  return KthLargest(sample.data(), len, plan.top_k_samples - 1, exec);
}

struct Adapted {
  float tau;
  std::size_t count;
  int iters;
  bool resample;
};

// The reference code's adaptation loop, then the overflow guard (dgc.h steps 3 and 4).
Adapted Adapt(ThresholdCounter& counter, float tau, std::size_t k, const DgcSelectOptions& options) {
  const double upper = options.compress_upper_bound * static_cast<double>(k);
  const double lower = options.compress_lower_bound * static_cast<double>(k);
  std::size_t count = counter.Count(tau);
  int iters = 0;
  for (int it = 0; it < options.max_adaptation_iters; ++it) {
    if (count > k) {
      if (static_cast<double>(count) <= upper) break;
      if (options.resample) return {tau, count, iters, true};
      tau = tau * static_cast<float>(options.compress_upper_bound);
    } else if (static_cast<double>(count) < lower) {
      tau = tau * static_cast<float>(options.compress_lower_bound);
    } else {
      break;
    }
    count = counter.Count(tau);
    ++iters;
  }
  return {tau, count, iters, static_cast<double>(count) > upper};
}

absl::Status CheckSelectArgs(const float* d_v, std::size_t n, std::uint32_t* d_out_idx, float* d_out_val,
                             std::size_t capacity, std::size_t needed, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExec("DgcSelect", exec));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer("DgcSelect", "d_v", d_v, n));
  if (capacity < needed) {
    return absl::InvalidArgumentError(
        absl::StrCat("DgcSelect: capacity = ", capacity, " is below DgcCapacity = ", needed));
  }
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer("DgcSelect", "d_out_idx", d_out_idx, needed));
  return internal::CheckDevicePointer("DgcSelect", "d_out_val", d_out_val, needed);
}

absl::Status CheckRange(const char* field, double value, double lo, double hi, bool lo_open) {
  const bool ok = (lo_open ? value > lo : value >= lo) && value <= hi;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("DgcSelectOptions.", field, " = ", value, " must be in ", lo_open ? "(" : "[", lo, ", ", hi, "]"));
}

}  // namespace

absl::Status ValidateDgcSelectOptions(const DgcSelectOptions& options) {
  SKETCHPS_RETURN_IF_ERROR(CheckRange("compress_ratio", options.compress_ratio, 0.0, 1.0, true));
  SKETCHPS_RETURN_IF_ERROR(CheckRange("sample_ratio", options.sample_ratio, 0.0, 1.0, true));
  SKETCHPS_RETURN_IF_ERROR(CheckRange("compress_upper_bound", options.compress_upper_bound, 1.0, 1e6, false));
  SKETCHPS_RETURN_IF_ERROR(CheckRange("compress_lower_bound", options.compress_lower_bound, 0.0, 1.0, true));
  SKETCHPS_RETURN_IF_ERROR(CheckRange("max_adaptation_iters", options.max_adaptation_iters, 0.0, 1000.0, false));
  return absl::OkStatus();
}

absl::StatusOr<DgcPlan> PlanDgc(std::size_t n, const DgcSelectOptions& options) {
  SKETCHPS_RETURN_IF_ERROR(ValidateDgcSelectOptions(options));
  if (n >= (std::size_t{1} << 32)) {
    return absl::InvalidArgumentError(absl::StrCat("DgcSelect: n = ", n, " exceeds the uint32 index range"));
  }
  // Same arithmetic as the reference's `initialize` (Python floats are doubles).
  const double ratio = options.compress_ratio;
  const double nd = static_cast<double>(n);
  DgcPlan plan;
  plan.target = static_cast<std::size_t>(std::ceil(nd * ratio));
  plan.num_samples = n;
  if (options.sample_ratio < 1.0) {
    const double wanted = std::max(std::ceil(nd * options.sample_ratio), std::ceil(2.0 / ratio));
    if (nd > std::ceil(2.0 / ratio)) {
      plan.stride = static_cast<std::size_t>(std::ceil(nd / wanted / 32.0)) * 32 + 1;
      plan.num_samples = n / plan.stride;
      while (static_cast<double>(plan.num_samples) < wanted && plan.stride > 1) {
        plan.stride -= 8;
        plan.num_samples = n / plan.stride;
      }
    }
  }
  plan.top_k_samples = static_cast<std::size_t>(std::ceil(static_cast<double>(plan.num_samples) * ratio));
  return plan;
}

absl::StatusOr<std::size_t> DgcCapacity(std::size_t n, const DgcSelectOptions& options) {
  SKETCHPS_ASSIGN_OR_RETURN(const DgcPlan plan, PlanDgc(n, options));
  if (options.truncate_to_k) return plan.target;
  const auto upper =
      static_cast<std::size_t>(std::floor(options.compress_upper_bound * static_cast<double>(plan.target)));
  return std::max(plan.target, upper);
}

absl::StatusOr<DgcSelection> DgcSelect(const float* d_v, std::size_t n, const DgcSelectOptions& options,
                                       std::uint64_t seed, std::uint32_t* d_out_idx, float* d_out_val,
                                       std::size_t capacity, const Exec& exec) {
  SKETCHPS_ASSIGN_OR_RETURN(const DgcPlan plan, PlanDgc(n, options));
  SKETCHPS_ASSIGN_OR_RETURN(const std::size_t needed, DgcCapacity(n, options));
  SKETCHPS_RETURN_IF_ERROR(CheckSelectArgs(d_v, n, d_out_idx, d_out_val, capacity, needed, exec));
  DgcSelection result;
  result.target = plan.target;
  if (n == 0) return result;

  const float tau = SampleThreshold(d_v, n, plan, options.strided_sample, seed, exec);
  ThresholdCounter counter(d_v, n, static_cast<float>(options.compress_lower_bound), exec);
  const Adapted adapted = Adapt(counter, tau, plan.target, options);
  result.threshold = adapted.tau;
  result.adaptation_iters = adapted.iters;
  if (adapted.resample) {
    result.resampled = true;
    SKETCHPS_ASSIGN_OR_RETURN(result.count, TopK(d_v, n, plan.target, d_out_idx, d_out_val, exec));
    SKETCHPS_RETURN_IF_ERROR(SortByIndex(d_out_idx, d_out_val, result.count, exec));
    return result;
  }
  const std::size_t limit = options.truncate_to_k ? plan.target : adapted.count;
  counter.Write(adapted.tau, limit, d_out_idx, d_out_val);
  result.count = std::min(adapted.count, limit);
  result.truncated = adapted.count > limit;
  return result;
}

}  // namespace sketchps::kernels
