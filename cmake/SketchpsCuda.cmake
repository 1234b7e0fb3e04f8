# The kernel backends and their Thrust targets.
#
# kernels/ is one Thrust source built as a shared library per backend, with one soname and one ABI
# (kernels/CMakeLists.txt):
#   CPU   always: the C++ compiler, Thrust's OpenMP device system          -> <build>/lib/
#   CUDA  when SKETCHPS_CUDA is ON, or AUTO and nvcc is found: nvcc, CUDA   -> <build>/lib/cuda/
# Everything else is compiled once and links the CPU library; a process runs on CUDA when the CUDA
# library is found first (LD_LIBRARY_PATH=<build>/lib/cuda, docs/gpu.md).
#
# Thrust comes from the CUDA toolkit's CCCL (the headers nvcc itself uses, so both backends see one
# Thrust). Where /usr/local/cuda is absent, Debian's libthrust-dev serves the CPU backend.
include(CheckLanguage)

set(SKETCHPS_CUDA_KERNELS OFF)
if(SKETCHPS_CUDA STREQUAL "AUTO" OR SKETCHPS_CUDA STREQUAL "ON")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(SKETCHPS_CUDA_KERNELS ON)
  elseif(SKETCHPS_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SKETCHPS_CUDA=ON but no CUDA compiler (nvcc) was found. "
                        "Install the CUDA toolkit or configure with -DSKETCHPS_CUDA=OFF.")
  endif()
elseif(NOT SKETCHPS_CUDA STREQUAL "OFF")
  message(FATAL_ERROR "SKETCHPS_CUDA must be AUTO, ON or OFF (got '${SKETCHPS_CUDA}')")
endif()

if(SKETCHPS_CUDA_KERNELS)
  # Explicit architectures: 'native' fails on machines without a GPU (>= 75 for CUDA 13). compute_80
  # PTX runs on every card from Ampere on (compiled by the driver at first use); sm_90 code skips
  # that on Hopper (H100, H200). CI compiles the PTX only (.ci/run: -DSKETCHPS_CUDA_ARCHS=80-virtual).
  set(SKETCHPS_CUDA_ARCHS "80-virtual;90-real" CACHE STRING "Architectures of the CUDA kernels (CMAKE_CUDA_ARCHITECTURES syntax)")
  set(CMAKE_CUDA_ARCHITECTURES ${SKETCHPS_CUDA_ARCHS})
  enable_language(CUDA)
  # CMake 3.25 knows no C++20 flag for nvcc; kernels/ is C++17 on both backends (kernels/CMakeLists.txt).
  find_package(CUDAToolkit REQUIRED)
endif()

find_package(CCCL CONFIG QUIET HINTS /usr/local/cuda/lib64/cmake /usr/local/cuda/lib/cmake)
if(CCCL_FOUND)
  set(SKETCHPS_THRUST_SOURCE "CCCL ${CCCL_VERSION} (CUDA toolkit)")
else()
  if(SKETCHPS_CUDA_KERNELS)
    message(FATAL_ERROR "CUDA kernels requested but the toolkit's CCCL package was not found")
  endif()
  find_package(Thrust CONFIG REQUIRED PATHS /usr/share/cmake/thrust)
  set(SKETCHPS_THRUST_SOURCE "Debian libthrust-dev ${Thrust_VERSION}")
endif()

thrust_create_target(sketchps_thrust HOST CPP DEVICE OMP)
if(SKETCHPS_CUDA_KERNELS)
  thrust_create_target(sketchps_thrust_cuda HOST CPP DEVICE CUDA)
endif()
message(STATUS "sketchps: Thrust from ${SKETCHPS_THRUST_SOURCE}")
