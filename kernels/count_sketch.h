// Count Sketch kernels: accumulate, merge, estimate, heavy-hitter recovery, L2 estimate.
//
// A sketch table is float32 [rows][cols], row-major, in device memory of the active backend
// (kernels/backend.h), owned by the caller; hashing is common/count_sketch_hash.h. The sketch is
// linear: S(αx + βy) = αS(x) + βS(y), and tables built with the same hash params add up.
//
// Determinism:
//   - Buckets, signs, SketchMerge, SketchEstimate/All, SketchRecover and SketchL2Estimate are
//     deterministic functions of their inputs on every backend and thread count (merge is an
//     elementwise add in fixed order; estimates are exact sign flips and a median).
//   - SketchAccumulate/Sparse may add floating-point values into a cell in varying order: on CUDA
//     with atomics; on the CPU backend each OpenMP thread sketches its slice of the input into a
//     private table and the private tables are added in thread order (deterministic for a given
//     thread count), falling back to atomic adds when private tables would cost more than they
//     save. Results agree to float rounding; integer-valued inputs of moderate size are exact.
//     Where nodes must agree bit for bit, exchange and merge tables instead of re-accumulating.
//   - The CPU backend's large-table orders (below) change when an addition happens, never which
//     additions a cell receives or their order: binned and direct tables are bit-identical for the
//     same thread count, and estimates are the same in either order.
//
// Conventions: coordinates are uint32 indices in [0, hash.dim()); inputs are expected finite;
// estimate ties and the top-k order follow kernels/select.h (|value| descending, index ascending).
// Tables must hold hash.cells() floats (not checkable here). Temporaries come from exec.scratch
// (required); nothing else is allocated. Errors: InvalidArgument naming the argument for null
// pointers, an empty hash, or sizes or indices beyond hash.dim(); nothing is written when an error
// is returned. Thread-safety: as for Exec (one thread per Scratch).
//
// Cost per row per entry: a hash evaluation (five 64-bit multiplications for kPolynomial61, three
// for kSplitMix64) and one random access to the table row. On the CPU backend, dense inputs and
// all-coordinate estimates (SketchEstimateAll, SketchRecover) hash kPolynomial61 in 8 interleaved
// SIMD lanes by additions only (kernels/internal/poly_lanes.h), a batch of entries before touching
// the table; kSplitMix64 and listed coordinates are hashed one entry at a time. The random table
// accesses then cost about as much as the hashing while a row fits in the L2 cache (the row is 1 MB
// at the bench's c = 256k). For larger tables the CPU backend changes the order of its table
// accesses (kernels/internal/sketch_binning.h): SketchEstimateAll and SketchRecover read one row at
// a time for items of up to 256K coordinates (tables of 2 MiB or more; `rows` floats per coordinate
// of an item per thread from the scratch, at most 8 MiB), and accumulation bins its updates by
// column range once rows reach 12 MiB (c >= 3·2^20; bin lists of about two rows per thread from the
// scratch). Both keep results bit-identical. Between 2 MiB and 12 MiB rows the accumulation's cost
// per entry still grows with c: about 2x from c = 256k to c = 1M (docs/reports/benchmarks.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/count_sketch_hash.h"
#include "kernels/backend.h"

namespace sketchps::kernels {

// d_table += S(x) for the dense vector d_x[0..n), n <= hash.dim(). Zero entries leave the table
// unchanged. On the CPU backend, up to one private table per extra thread comes from the scratch.
absl::Status SketchAccumulate(const float* d_x, std::size_t n, const sketchps::CountSketchHash& hash, float* d_table,
                              const Exec& exec);

// d_table += S(x) for the sparse vector x[d_idx[t]] = d_val[t], t < count. Indices must be below
// hash.dim() (checked: InvalidArgument naming d_idx); duplicates add up; zero values are skipped.
absl::Status SketchAccumulateSparse(const std::uint32_t* d_idx, const float* d_val, std::size_t count,
                                    const sketchps::CountSketchHash& hash, float* d_table, const Exec& exec);

// d_dst[c] += d_src[c] for c < cells: elementwise, exact order (one addition per cell), so the same
// sequence of merges gives bit-identical tables on every node and backend. d_dst == d_src is allowed.
absl::Status SketchMerge(float* d_dst, const float* d_src, std::size_t cells, const Exec& exec);

// d_out[t] = median over rows j of s_j(i)·T[j][h_j(i)] for i = d_idx[t], t < count (lower median for
// even rows). Indices must be below hash.dim() (checked: InvalidArgument naming d_idx).
absl::Status SketchEstimate(const float* d_table, const sketchps::CountSketchHash& hash, const std::uint32_t* d_idx,
                            std::size_t count, float* d_out, const Exec& exec);

// d_est[i] = the estimate of coordinate i for every i < n, n <= hash.dim().
absl::Status SketchEstimateAll(const float* d_table, const sketchps::CountSketchHash& hash, std::size_t n, float* d_est,
                               const Exec& exec);

// Heavy-hitter recovery (CSVec unSketch(k)): estimates every coordinate i < n (n <= hash.dim()) and
// writes the min(k, n) coordinates with the largest |estimate| to d_out_idx, their estimates to
// d_out_est, in rank order (|estimate| descending, index ascending); returns how many were written.
// Keeps only the coordinates above a threshold sampled from the estimates of 2^15 coordinates (about
// 2k of them) in one estimation pass, and sorts those; falls back to kernels::TopK over an n-float
// estimate array from the scratch when that could miss one (kernels/internal/sketch_recover.h).
absl::StatusOr<std::size_t> SketchRecover(const float* d_table, const sketchps::CountSketchHash& hash, std::size_t n,
                                          std::size_t k, std::uint32_t* d_out_idx, float* d_out_est, const Exec& exec);

// The sketch's estimate of ||x||_2: sqrt(median over rows of sum_c T[j][c]^2) (lower median for even
// rows), with squares summed in double in a fixed order (deterministic on every backend).
// Errors: InvalidArgument when rows is not in [1, 64], cols is 0 or the table is null.
absl::StatusOr<double> SketchL2Estimate(const float* d_table, std::uint32_t rows, std::uint32_t cols, const Exec& exec);

}  // namespace sketchps::kernels
