// Index-array helpers (see index_ops.h). One Thrust source for the CPU (OpenMP) and CUDA backends.
#include "kernels/index_ops.h"

#include <thrust/functional.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>
#include <thrust/transform.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/internal/pointer_check.h"
#include "kernels/internal/policy.h"

namespace sketchps::kernels {
namespace {

using internal::Policy;

constexpr std::uint64_t kMaxIndex = 0xFFFFFFFFull;

struct AddOffset {
  std::uint32_t offset;
  SKETCHPS_HD std::uint32_t operator()(std::uint32_t i) const { return i + offset; }
};

}  // namespace

absl::Status OffsetIndices(std::uint32_t* d_idx, std::size_t count, std::uint32_t offset, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExecAndPointer("OffsetIndices", exec, "d_idx", d_idx, count));
  if (count == 0 || offset == 0) return absl::OkStatus();
  const std::uint32_t max =
      thrust::reduce(Policy(exec), d_idx, d_idx + count, std::uint32_t{0}, thrust::maximum<std::uint32_t>());
  if (std::uint64_t{max} + offset > kMaxIndex) {
    return absl::InvalidArgumentError(
        absl::StrCat("OffsetIndices: offset ", offset, " moves index ", max, " past 2^32 - 1"));
  }
  thrust::transform(Policy(exec), d_idx, d_idx + count, d_idx, AddOffset{offset});
  return absl::OkStatus();
}

absl::Status IndexSequence(std::uint32_t* d_idx, std::size_t count, std::uint32_t start, const Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(internal::CheckExecAndPointer("IndexSequence", exec, "d_idx", d_idx, count));
  if (std::uint64_t{start} + count > kMaxIndex + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("IndexSequence: start ", start, " + count ", count, " exceeds the uint32 index range"));
  }
  if (count == 0) return absl::OkStatus();
  thrust::sequence(Policy(exec), d_idx, d_idx + count, start);
  return absl::OkStatus();
}

}  // namespace sketchps::kernels
