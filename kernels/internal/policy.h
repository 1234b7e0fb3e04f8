// Internal to kernels/*.cc: the Thrust execution policy for an Exec, and the backend switch.
// Never include from a public header (it pulls in Thrust).
//
// On CUDA the policy is thrust::cuda::par(scratch).on(stream): every algorithm synchronizes the
// stream before it returns, so results are visible to host copies right away. That costs overlap
// between consecutive kernels; it is the safe choice while no GPU is available to test a
// par_nosync pipeline (see docs/design-notes.md).
#pragma once

#include <thrust/execution_policy.h>

#include "common/hd.h"
#include "kernels/backend.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>

#include <thrust/system/cuda/execution_policy.h>
#define SKETCHPS_KERNELS_CUDA 1
#else
#include <thrust/system/omp/execution_policy.h>
#define SKETCHPS_KERNELS_CUDA 0
#endif

namespace sketchps::kernels::internal {

inline auto Policy(const Exec& exec) {
#if SKETCHPS_KERNELS_CUDA
  return thrust::cuda::par(*exec.scratch).on(static_cast<cudaStream_t>(exec.stream));
#else
  return thrust::omp::par(*exec.scratch);
#endif
}

}  // namespace sketchps::kernels::internal
