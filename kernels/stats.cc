// Statistics kernels (see stats.h). One Thrust source for the CPU (OpenMP) and CUDA backends.
#include "kernels/stats.h"

#include <thrust/functional.h>
#include <thrust/transform_reduce.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/internal/policy.h"

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

struct MergeMoments {
  SKETCHPS_HD Moments operator()(const Moments& a, const Moments& b) const {
    return Moments{a.count + b.count,     a.sum + b.sum,
                   a.sum_sq + b.sum_sq,   a.sum_log + b.sum_log,
                   a.min < b.min ? a.min : b.min, a.max > b.max ? a.max : b.max};
  }
};

// The moments contributed by one entry. kLog selects whether ln z is evaluated.
template <bool kLog>
struct ExceedanceTerm {
  float eta;     // entries with !(|x| <= eta) count (NaN included on purpose)
  double shift;  // max(eta, 0)
  SKETCHPS_HD Moments operator()(float v) const {
    const float a = fabsf(v);
    if (a <= eta) return EmptyMoments();
    const double z = static_cast<double>(a) - shift;
    return Moments{1ull, z, z * z, kLog ? log(z) : 0.0, z, z};
  }
};

struct AbsAsDouble {
  SKETCHPS_HD double operator()(float v) const { return static_cast<double>(fabsf(v)); }
};

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
struct SumSqTerm {
  SKETCHPS_HD SumSq operator()(float v) const {
    const double x = static_cast<double>(v);
    return SumSq{x, x * x};
  }
};

absl::Status CheckInput(const float* d_x, std::size_t n, const Exec& exec, const char* fn) {
  if (n > 0 && d_x == nullptr) return absl::InvalidArgumentError(absl::StrCat(fn, ": input pointer d_x is null"));
  if (exec.scratch == nullptr) return absl::InvalidArgumentError(absl::StrCat(fn, ": exec.scratch is null"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SampleMoments> ExceedanceStats(const float* d_x, std::size_t n, float eta, LogMoment log_moment,
                                              const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(CheckInput(d_x, n, exec, "ExceedanceStats"));
  if (std::isnan(eta)) return absl::InvalidArgumentError("ExceedanceStats: eta is NaN");
  const double shift = eta > 0.0f ? static_cast<double>(eta) : 0.0;
  Moments m = EmptyMoments();
  if (n > 0) {
    if (log_moment == LogMoment::kCompute) {
      m = thrust::transform_reduce(Policy(exec), d_x, d_x + n, ExceedanceTerm<true>{eta, shift}, m, MergeMoments{});
    } else {
      m = thrust::transform_reduce(Policy(exec), d_x, d_x + n, ExceedanceTerm<false>{eta, shift}, m, MergeMoments{});
    }
  }
  SampleMoments out;
  out.count = m.count;
  out.sum = m.sum;
  out.sum_sq = m.sum_sq;
  out.sum_log = log_moment == LogMoment::kCompute ? m.sum_log : std::numeric_limits<double>::quiet_NaN();
  out.min = m.min;
  out.max = m.max;
  return out;
}

absl::StatusOr<double> SumAbs(const float* d_x, std::size_t n, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(CheckInput(d_x, n, exec, "SumAbs"));
  if (n == 0) return 0.0;
  return thrust::transform_reduce(Policy(exec), d_x, d_x + n, AbsAsDouble{}, 0.0, thrust::plus<double>());
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
  std::vector<MeanStd> out(segments.size());
  for (std::size_t l = 0; l < segments.size(); ++l) {
    const Segment& s = segments[l];
    if (s.size == 0) continue;
    const float* first = d_x + s.offset;
    const SumSq acc =
        thrust::transform_reduce(Policy(exec), first, first + s.size, SumSqTerm{}, SumSq{0.0, 0.0}, MergeSumSq{});
    const double count = static_cast<double>(s.size);
    const double mean = acc.sum / count;
    const double var = acc.sum_sq / count - mean * mean;
    out[l] = MeanStd{mean, std::sqrt(var < 0.0 ? 0.0 : var)};  // NaN input stays NaN
  }
  return out;
}

}  // namespace sketchps::kernels
