// One-pass statistics kernels for the statistical threshold estimators (SIDCo, SDAGC).
//
// Each function reads its input exactly once (one Thrust transform_reduce per call, per segment for
// SegmentMeanStd), accumulates in double regardless of the float input, and returns host values.
// The results are deterministic for a given backend and thread count up to the rounding of the
// parallel double sums (relative differences around 1e-15 between thread counts/backends).
//
// Inputs follow the kernels conventions (kernels/select.h): d_x is a device pointer of the active
// backend; temporaries come from exec.scratch (required). Non-finite entries are not filtered out:
// they make the returned sums non-finite, so the fits in common/distribution_fit.h reject them with
// a clear error instead of producing a silently wrong threshold.
//
// Thread-safety: as for every kernel, one Exec per thread. Errors: InvalidArgument (null pointers
// with n > 0, a missing scratch, segments outside [0, n)); never aborts on input.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "common/distribution_fit.h"
#include "kernels/backend.h"

namespace sketchps::kernels {

// The moments ExceedanceStats accumulates besides count and sum. Each costs work per entry (ln z
// most, one log per exceedance), so estimators ask only for what their fit uses; moments not asked
// for come back NaN.
struct MomentSet {
  bool sum_sq = true;    // Σ z²   (variance: the generalized Pareto fit)
  bool sum_log = false;  // Σ ln z (the gamma fit)
  bool min_max = true;   // min z and max z (the shift of a refinement stage)
};

// Moments of the exceedances z = |x| - max(eta, 0) over every entry of d_x[0..n) that is not
// <= eta (i.e. |x| > eta, plus NaN entries, which poison the sums):
//   eta >= 0   entries with |x| > eta, shifted by eta   (eta = 0: every nonzero entry, unshifted)
//   eta <  0   every entry, unshifted (z = |x|)
// The comparison is done in float, exactly as kernels::ThresholdSelect does, so "count" equals
// CountAbove(d_x, n, eta) for finite inputs and eta >= 0; z is computed in double, so z > 0 for
// every counted finite entry when eta >= 0. min/max are +inf/-inf when count == 0.
// Cost on the CPU backend, in streaming passes (kernels::SumAbs, vector_ops.h): about 1.2-1.8 for eta <= 0 (a branch
// that almost always keeps), about 1.8-2.6 for eta > 0 (branch-free, any fraction kept), depending on `moments`;
// sum_log adds a log per kept entry.
absl::StatusOr<SampleMoments> ExceedanceStats(const float* d_x, std::size_t n, float eta, MomentSet moments,
                                              const Exec& exec);

// A contiguous range [offset, offset + size) of a flat vector (one layer of a layer table).
struct Segment {
  std::size_t offset = 0;
  std::size_t size = 0;
};

// Population mean and standard deviation of the signed values of one segment (0 and 0 when empty).
struct MeanStd {
  double mean = 0.0;
  double stddev = 0.0;
};

// Mean and standard deviation of the signed values of each segment of d_x[0..n), in segment order.
// Segments may be in any order and may overlap or leave gaps; every segment must lie inside [0, n).
// One pass over each segment: Σx and Σx² in double (the variance cancellation is harmless while
// |mean| / stddev << 2^20, which gradients satisfy by far).
absl::StatusOr<std::vector<MeanStd>> SegmentMeanStd(const float* d_x, std::size_t n,
                                                    const std::vector<Segment>& segments, const Exec& exec);

}  // namespace sketchps::kernels
