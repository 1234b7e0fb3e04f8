// SKETCHPS_HD marks functions that run on both host and device. Under nvcc it expands to
// __host__ __device__; under a plain C++ compiler (CPU backend) it expands to nothing, because
// CCCL 3 no longer defines __host__/__device__ for non-CUDA compilers.
#pragma once

#if defined(__CUDACC__)
#define SKETCHPS_HD __host__ __device__
#else
#define SKETCHPS_HD
#endif
