// Selection kernels: exact top-k by magnitude and threshold selection with compaction.
//
// Conventions shared by every selection in sketchps:
//   - Magnitude order: an entry ranks higher when |x| is larger; equal magnitudes rank by smaller
//     index first. TopK output is sorted in that order, so results are deterministic and identical
//     on every backend and thread count.
//   - Inputs are expected to be finite. Non-finite entries never corrupt memory, but where they
//     land in the order is unspecified (schemes guard against NaN/Inf before selecting).
//   - Indices are uint32 positions inside the input range (shard-local); n < 2^32.
//   - All pointers are device pointers of the active backend (kernels/backend.h). Temporary
//     storage comes from exec.scratch; nothing else is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace sketchps::kernels {

// Writes the min(k, n) highest-ranked entries of d_x[0..n) to d_out_idx / d_out_val (signed values),
// in rank order, and returns how many were written. d_out_* must hold min(k, n) elements.
// Errors: InvalidArgument when n >= 2^32 or a pointer is null while n > 0.
//
// Method: a deterministic sample of up to 2^17 entries estimates a threshold that admits about
// 1.4k entries; one counting pass and one compaction pass collect those candidates, and only
// the candidates are sorted. Cost: about 2-3 streaming passes over d_x plus a sort of ~1.4k items.
absl::StatusOr<std::size_t> TopK(const float* d_x, std::size_t n, std::size_t k, std::uint32_t* d_out_idx,
                                 float* d_out_val, const Exec& exec);

// Number of entries with |x| > tau.
absl::StatusOr<std::size_t> CountAbove(const float* d_x, std::size_t n, float tau, const Exec& exec);

// Compacts every entry with |x| > tau, in increasing index order, into d_out_idx / d_out_val and
// returns the count. When more than `capacity` entries qualify nothing is written and the result is
// ResourceExhausted with the count in the message (pass capacity = n to never fail).
// Cost: about two streaming passes (count per chunk, then write per chunk skipping empty blocks).
absl::StatusOr<std::size_t> ThresholdSelect(const float* d_x, std::size_t n, float tau, std::size_t capacity,
                                            std::uint32_t* d_out_idx, float* d_out_val, const Exec& exec);

// A contiguous range [offset, offset + size) of the input with its own threshold (a layer).
struct ThresholdSegment {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  float tau = 0.0f;
};

// ThresholdSelect with one threshold per segment: compacts every entry of every segment with
// |x| > segment.tau, in increasing index order (segments must be sorted, disjoint, inside [0, n)).
// Entries outside all segments are never selected. Same capacity rule and cost as ThresholdSelect.
absl::StatusOr<std::size_t> ThresholdSelectSegments(const float* d_x, std::size_t n,
                                                    const std::vector<ThresholdSegment>& segments, std::size_t capacity,
                                                    std::uint32_t* d_out_idx, float* d_out_val, const Exec& exec);

// The value at rank `rank` (0-based, magnitude order) of |x| over a sample: used to turn a target
// density into a threshold. Returns |x| of the entry, i.e. ThresholdSelect(tau = result) selects
// about rank entries. Sampling is deterministic in (n, seed). sample_size = 0 means all of d_x.
absl::StatusOr<float> SampledMagnitudeQuantile(const float* d_x, std::size_t n, double fraction,
                                               std::size_t sample_size, std::uint64_t seed, const Exec& exec);

}  // namespace sketchps::kernels
