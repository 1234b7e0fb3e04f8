// Sparse-vector kernels (see sparse.h). One Thrust source for the CPU (OpenMP) and CUDA backends.
#include "kernels/sparse.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/gather.h>
#include <thrust/iterator/constant_iterator.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/merge.h>
#include <thrust/reduce.h>
#include <thrust/scatter.h>
#include <thrust/sort.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/internal/pointer_check.h"
#include "kernels/internal/policy.h"
#include "kernels/internal/scratch_array.h"
#include "kernels/select.h"

namespace sketchps::kernels {
namespace {

using internal::Policy;
using internal::ScratchArray;

// *addr += v as one atomic read-modify-write: atomicAdd on the GPU, a compare-and-swap loop on the
// float's bit pattern on the host (GCC has no atomic fetch-add for float).
SKETCHPS_HD inline void AtomicAddFloat(float* addr, float v) {
#if SKETCHPS_KERNELS_CUDA && defined(__CUDA_ARCH__)
  atomicAdd(addr, v);
#else
  auto* word = reinterpret_cast<std::uint32_t*>(addr);
  std::uint32_t expected = __atomic_load_n(word, __ATOMIC_RELAXED);
  for (;;) {
    float current = 0.0f;
    memcpy(&current, &expected, sizeof(float));
    const float updated = current + v;
    std::uint32_t desired = 0;
    memcpy(&desired, &updated, sizeof(float));
    if (__atomic_compare_exchange_n(word, &expected, desired, /*weak=*/true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      return;
    }
  }
#endif
}

struct FillAtOp {
  float* x;
  const std::uint32_t* idx;
  float value;
  SKETCHPS_HD void operator()(std::size_t i) const { x[idx[i]] = value; }
};

struct ScatterAddOp {
  const std::uint32_t* idx;
  const float* val;
  float* dense;
  SKETCHPS_HD void operator()(std::size_t i) const { AtomicAddFloat(dense + idx[i], val[i]); }
};

// InvalidArgument unless every index in d_idx[0..count) is < n (one max-reduction, no writes).
absl::Status CheckRange(const char* fn, const std::uint32_t* d_idx, std::size_t count, std::size_t n,
                        const Exec& exec) {
  if (count == 0) return absl::OkStatus();
  const std::uint32_t max_index =
      thrust::reduce(Policy(exec), d_idx, d_idx + count, std::uint32_t{0}, thrust::maximum<std::uint32_t>());
  if (max_index >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat(fn, ": d_idx holds index ", max_index, ", out of range for n = ", n));
  }
  return absl::OkStatus();
}

// The checks ScatterAdd, FillAt and Gather share: a scratch arena, d_idx and every other named array
// non-null when count > 0, and every index below n. The first failure names `fn` and the argument.
struct NamedArray {
  const void* ptr;
  const char* name;
};
absl::Status CheckIndexedCall(const char* fn, const Exec& exec, const std::uint32_t* d_idx, std::size_t count,
                              std::size_t n, std::initializer_list<NamedArray> arrays) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExec(fn, exec));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(fn, "d_idx", d_idx, count));
  for (const NamedArray& a : arrays) SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(fn, a.name, a.ptr, count));
  return CheckRange(fn, d_idx, count, n, exec);
}

absl::Status CheckStrictlyIncreasing(const char* fn, const std::uint32_t* d_idx, std::size_t count, const char* name,
                                     const Exec& exec) {
  // is_sorted with <= as the "less" relation holds exactly when no neighbour pair has idx[i+1] <= idx[i].
  if (count > 1 && !thrust::is_sorted(Policy(exec), d_idx, d_idx + count, thrust::less_equal<std::uint32_t>())) {
    return absl::InvalidArgumentError(absl::StrCat(fn, ": ", name, " is not strictly increasing"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ScatterAdd(const std::uint32_t* d_idx, const float* d_val, std::size_t count, float* d_dense,
                        std::size_t n, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(
      CheckIndexedCall("ScatterAdd", exec, d_idx, count, n, {{d_val, "d_val"}, {d_dense, "d_dense"}}));
  if (count == 0) return absl::OkStatus();
  thrust::counting_iterator<std::size_t> first(0);
  thrust::for_each(Policy(exec), first, first + count, ScatterAddOp{d_idx, d_val, d_dense});
  return absl::OkStatus();
}

absl::Status FillAt(float* d_x, std::size_t n, const std::uint32_t* d_idx, std::size_t count, float value,
                    const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(CheckIndexedCall("FillAt", exec, d_idx, count, n, {{d_x, "d_x"}}));
  if (count == 0) return absl::OkStatus();
  thrust::counting_iterator<std::size_t> first(0);
  thrust::for_each(Policy(exec), first, first + count, FillAtOp{d_x, d_idx, value});
  return absl::OkStatus();
}

absl::Status Gather(const float* d_dense, std::size_t n, const std::uint32_t* d_idx, std::size_t count, float* d_out,
                    const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(CheckIndexedCall("Gather", exec, d_idx, count, n, {{d_out, "d_out"}, {d_dense, "d_dense"}}));
  if (count == 0) return absl::OkStatus();
  thrust::gather(Policy(exec), d_idx, d_idx + count, d_dense, d_out);
  return absl::OkStatus();
}

absl::Status SortByIndex(std::uint32_t* d_idx, float* d_val, std::size_t count, const Exec& exec) {
  constexpr const char* kFn = "SortByIndex";
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExec(kFn, exec));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_idx", d_idx, count));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_val", d_val, count));
  if (count < 2) return absl::OkStatus();
  thrust::stable_sort_by_key(Policy(exec), d_idx, d_idx + count, d_val);
  return absl::OkStatus();
}

absl::StatusOr<std::size_t> MergeSparse(const std::uint32_t* d_a_idx, const float* d_a_val, std::size_t a_count,
                                        const std::uint32_t* d_b_idx, const float* d_b_val, std::size_t b_count,
                                        std::uint32_t* d_out_idx, float* d_out_val, const Exec& exec) {
  constexpr const char* kFn = "MergeSparse";
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExec(kFn, exec));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_a_idx", d_a_idx, a_count));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_a_val", d_a_val, a_count));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_b_idx", d_b_idx, b_count));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_b_val", d_b_val, b_count));
  const std::size_t total = a_count + b_count;
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_out_idx", d_out_idx, total));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_out_val", d_out_val, total));
  SKETCHPS_RETURN_IF_ERROR(CheckStrictlyIncreasing(kFn, d_a_idx, a_count, "d_a_idx", exec));
  SKETCHPS_RETURN_IF_ERROR(CheckStrictlyIncreasing(kFn, d_b_idx, b_count, "d_b_idx", exec));
  if (total == 0) return std::size_t{0};

  // A stable merge puts a's entry before b's at an equal index; each input has an index at most
  // once, so every run of equal keys has length <= 2 and reduces to exactly a + b.
  ScratchArray<std::uint32_t> merged_idx(*exec.scratch, total);
  ScratchArray<float> merged_val(*exec.scratch, total);
  thrust::merge_by_key(Policy(exec), d_a_idx, d_a_idx + a_count, d_b_idx, d_b_idx + b_count, d_a_val, d_b_val,
                       merged_idx.data(), merged_val.data());
  const auto ends = thrust::reduce_by_key(Policy(exec), merged_idx.data(), merged_idx.data() + total, merged_val.data(),
                                          d_out_idx, d_out_val);
  return static_cast<std::size_t>(ends.first - d_out_idx);
}

absl::StatusOr<std::size_t> KeepTopK(const std::uint32_t* d_idx, const float* d_val, std::size_t count, std::size_t k,
                                     std::uint32_t* d_out_idx, float* d_out_val, const Exec& exec) {
  constexpr const char* kFn = "KeepTopK";
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExec(kFn, exec));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_idx", d_idx, count));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_val", d_val, count));
  k = std::min(k, count);
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_out_idx", d_out_idx, k));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_out_val", d_out_val, k));
  if (k == 0) return std::size_t{0};

  ScratchArray<std::uint32_t> pos(*exec.scratch, k);
  SKETCHPS_ASSIGN_OR_RETURN(const std::size_t kept, TopK(d_val, count, k, pos.data(), d_out_val, exec));
  thrust::gather(Policy(exec), pos.data(), pos.data() + kept, d_idx, d_out_idx);
  SKETCHPS_RETURN_IF_ERROR(SortByIndex(d_out_idx, d_out_val, kept, exec));
  return kept;
}

absl::StatusOr<std::size_t> KeepTopKMask(const float* d_val, std::size_t count, std::size_t k, std::uint8_t* d_keep,
                                         const Exec& exec) {
  constexpr const char* kFn = "KeepTopKMask";
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExec(kFn, exec));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_val", d_val, count));
  SKETCHPS_RETURN_IF_ERROR(internal::CheckDevicePointer(kFn, "d_keep", d_keep, count));
  if (count == 0) return std::size_t{0};
  k = std::min(k, count);

  ScratchArray<std::uint32_t> pos(*exec.scratch, std::max<std::size_t>(k, 1));
  ScratchArray<float> top_val(*exec.scratch, std::max<std::size_t>(k, 1));
  SKETCHPS_ASSIGN_OR_RETURN(const std::size_t kept, TopK(d_val, count, k, pos.data(), top_val.data(), exec));
  thrust::fill(Policy(exec), d_keep, d_keep + count, std::uint8_t{0});
  thrust::constant_iterator<std::uint8_t> one(1);
  thrust::scatter(Policy(exec), one, one + kept, pos.data(), d_keep);
  return kept;
}

}  // namespace sketchps::kernels
