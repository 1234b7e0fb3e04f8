// Sparse-vector kernels for the server and peer reductions: scatter-add into a dense buffer,
// gather from it, sort by index, the gTop-k pairwise merge and keep-top-k.
//
// A sparse vector is a pair of parallel device arrays (d_idx: uint32, d_val: float) of length
// `count`. Indices are shard-local positions; "index-sorted" means strictly increasing indices,
// which is what payload decoders guarantee and what the wire carries.
//
// Contract shared by every function here:
//   - Pointers are device pointers of the active backend (kernels/backend.h); the caller owns every
//     buffer and sizes the outputs as each function states. Nothing is retained after return.
//   - Temporary storage comes from exec.scratch (must be non-null); nothing else is allocated.
//   - Errors are InvalidArgument with a message naming the offending argument: a null pointer with a
//     nonzero length, a null exec.scratch, an index out of range, or unsorted input where sorted input
//     is required. Every check runs before the first write, so on error no output is touched.
//   - Results are deterministic: identical on every backend and thread count for identical inputs.
//   - Inputs are expected to be finite (schemes run the NaN/Inf guard first); non-finite values never
//     corrupt memory, but their rank in KeepTopK is unspecified.
//   - Thread-safety: as the Exec (one thread per Scratch at a time).
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace sketchps::kernels {

// d_dense[d_idx[i]] += d_val[i] for i < count.
// Precondition: indices are unique within one call (payload decoders deliver strictly increasing
// indices). Each entry is added with one atomic float add, so duplicates never race, but their
// summation order, and hence the last bits of the sum, is then unspecified. With unique indices each
// element receives at most one add per call, so calling ScatterAdd once per payload in a fixed order
// gives bitwise-deterministic sums.
// Errors: InvalidArgument when any index is >= n (checked by a reduction before anything is written,
// so the dense buffer is untouched on error).
absl::Status ScatterAdd(const std::uint32_t* d_idx, const float* d_val, std::size_t count, float* d_dense,
                        std::size_t n, const Exec& exec);

// d_out[i] = d_dense[d_idx[i]] for i < count. d_out holds count elements.
// Errors: InvalidArgument when any index is >= n (nothing written).
absl::Status Gather(const float* d_dense, std::size_t n, const std::uint32_t* d_idx, std::size_t count, float* d_out,
                    const Exec& exec);

// d_x[d_idx[i]] = value for i < count (e.g. zeroing the sent entries of an error-feedback residual).
// Errors: InvalidArgument when any index is >= n (nothing written).
absl::Status FillAt(float* d_x, std::size_t n, const std::uint32_t* d_idx, std::size_t count, float value,
                    const Exec& exec);

// Sorts the pairs (d_idx[i], d_val[i]) by index, ascending, in place. Stable: pairs with equal
// indices keep their relative order. (TopK returns rank order; the wire wants index order.)
absl::Status SortByIndex(std::uint32_t* d_idx, float* d_val, std::size_t count, const Exec& exec);

// Union of two index-sorted sparse vectors a and b: every index of either appears once in the output,
// in increasing order; where both hold an index the output value is a_val + b_val. Float addition of
// two terms is commutative, so MergeSparse(a, b) and MergeSparse(b, a) are bitwise identical (the
// property the gTop-k recursive doubling relies on). This is the pairwise merge before KeepTopK.
// d_out_* must hold a_count + b_count elements. Returns the number of output entries.
// Errors: InvalidArgument when d_a_idx or d_b_idx is not strictly increasing.
absl::StatusOr<std::size_t> MergeSparse(const std::uint32_t* d_a_idx, const float* d_a_val, std::size_t a_count,
                                        const std::uint32_t* d_b_idx, const float* d_b_val, std::size_t b_count,
                                        std::uint32_t* d_out_idx, float* d_out_val, const Exec& exec);

// Keeps the min(k, count) entries of largest |value| and writes them index-sorted to d_out_*
// (which hold min(k, count) elements). Ranking is kernels::TopK's: |value| descending, then input
// position ascending; for index-sorted input (e.g. MergeSparse output) that is the project's
// tie-break "|value| descending, then index ascending". Returns the number of entries written
// (fewer than min(k, count) only when values are NaN, which are never kept).
absl::StatusOr<std::size_t> KeepTopK(const std::uint32_t* d_idx, const float* d_val, std::size_t count, std::size_t k,
                                     std::uint32_t* d_out_idx, float* d_out_val, const Exec& exec);

// The same selection as KeepTopK, reported per input position: d_keep[i] = 1 when entry i is among
// the kept ones, else 0 (d_keep holds count bytes). gTop-k uses it to put the entries that did not
// survive back into the residual. Returns the number of kept entries.
absl::StatusOr<std::size_t> KeepTopKMask(const float* d_val, std::size_t count, std::size_t k, std::uint8_t* d_keep,
                                         const Exec& exec);

}  // namespace sketchps::kernels
