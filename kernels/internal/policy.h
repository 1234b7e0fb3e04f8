// Internal to kernels/*.cc: the Thrust execution policy for an Exec, and the backend switch.
// Never include from a public header (it pulls in Thrust).
//
// On CUDA the policy is thrust::cuda::par_nosync(scratch).on(stream): algorithms that return nothing
// to the host are only queued, so consecutive kernels run back to back; algorithms that return a
// value (reduce, count) and the backend's copies to the host (CopyToHost: cudaMemcpy on the legacy
// default stream, the only stream used) wait for the queued work, so every result a caller reads is
// complete. Temporaries go back to the Scratch when an algorithm returns, possibly before its kernel
// ran: the next user of a block is queued on the same stream, after it (kernels/backend.h).
#pragma once

#include <thrust/execution_policy.h>

#include "common/hd.h"
#include "kernels/backend.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include <thrust/system/cuda/execution_policy.h>
#define SKETCHPS_KERNELS_CUDA 1
#else
#include <thrust/system/omp/execution_policy.h>
#define SKETCHPS_KERNELS_CUDA 0
#endif

namespace sketchps::kernels::internal {

inline auto Policy(const Exec& exec) {
#if SKETCHPS_KERNELS_CUDA
  return thrust::cuda::par_nosync(*exec.scratch).on(static_cast<cudaStream_t>(exec.stream));
#else
  return thrust::omp::par(*exec.scratch);
#endif
}

#if SKETCHPS_KERNELS_CUDA
// Throws std::runtime_error naming `what` and CUDA's message unless err is cudaSuccess. A kernel
// failure (an illegal address, a launch error) is a bug or a broken device, not an input error.
inline void CudaCheck(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}
#endif

}  // namespace sketchps::kernels::internal
