// Index-array helpers for schemes that select per layer: a layer's selection comes back with
// layer-local indices (kernels::ThresholdSelect, kernels::DgcSelect on a layer's sub-range) and is
// shifted to range-local indices; a layer sent whole gets the consecutive indices of its entries.
//
// Contract (as every kernel, see kernels/select.h): pointers are device pointers of the active
// backend, the caller owns the buffers, temporaries come from exec.scratch (must be non-null) and
// nothing is retained. Errors are InvalidArgument naming the argument; nothing is written on error.
// Results are identical on every backend and thread count. Thread-safety: as the Exec.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/backend.h"

namespace sketchps::kernels {

// d_idx[i] += offset for i < count. Errors: null d_idx with count > 0, null scratch, or an
// index that would pass 2^32 - 1 (checked by one max-reduction before anything is written).
absl::Status OffsetIndices(std::uint32_t* d_idx, std::size_t count, std::uint32_t offset, const Exec& exec);

// d_idx[i] = start + i for i < count. Errors: null d_idx with count > 0, null scratch, or
// start + count > 2^32 (the last index would not fit).
absl::Status IndexSequence(std::uint32_t* d_idx, std::size_t count, std::uint32_t start, const Exec& exec);

}  // namespace sketchps::kernels
