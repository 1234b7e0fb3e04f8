// Internal: the work of kernels::SketchRecover once its arguments are checked (kernels/sketch_recover.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "common/count_sketch_hash.h"
#include "kernels/backend.h"
#include "kernels/internal/sketch_binning.h"

namespace sketchps::kernels::internal {

// The k coordinates i < n with the largest |estimate| (ties: smaller index first), in that order,
// with their estimates; 0 < k <= n <= hash.dim(). Returns k.
//
// Method: the estimates of a deterministic sample of 2^15 coordinates give a threshold that about
// 2k of the n estimates reach; one estimation pass keeps only the coordinates at or above it (no
// n-sized estimate array), and only those are sorted. Whenever that cannot be exact (fewer than k
// reach the threshold, or a work item finds more candidates than its slots hold), or k > n / 4,
// every estimate is stored and kernels::TopK selects from them. Both estimation passes bin as
// `binning` says (internal/sketch_binning.h); the result does not depend on it.
absl::StatusOr<std::size_t> RecoverTopK(const float* d_table, const sketchps::CountSketchHash& hash, std::size_t n,
                                        std::size_t k, std::uint32_t* d_out_idx, float* d_out_est, const Exec& exec,
                                        const SketchBinning& binning);

}  // namespace sketchps::kernels::internal
