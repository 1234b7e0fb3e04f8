# Chooses the kernel backend and provides the Thrust target `sketchps_thrust`.
#
#   SKETCHPS_BACKEND = CPU   kernels/ compiled by the C++ compiler, Thrust device system OMP
#   SKETCHPS_BACKEND = CUDA  the same kernels/ sources compiled by nvcc, device system CUDA
#
# Thrust comes from the CUDA toolkit's CCCL (the headers nvcc itself uses, so both backends
# see one Thrust). Where /usr/local/cuda is absent, Debian's libthrust-dev is used for the CPU
# backend instead.
include(CheckLanguage)

set(SKETCHPS_BACKEND CPU)
if(SKETCHPS_CUDA STREQUAL "AUTO" OR SKETCHPS_CUDA STREQUAL "ON")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(SKETCHPS_BACKEND CUDA)
  elseif(SKETCHPS_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SKETCHPS_CUDA=ON but no CUDA compiler (nvcc) was found. "
                        "Install the CUDA toolkit or configure with -DSKETCHPS_CUDA=OFF.")
  endif()
elseif(NOT SKETCHPS_CUDA STREQUAL "OFF")
  message(FATAL_ERROR "SKETCHPS_CUDA must be AUTO, ON or OFF (got '${SKETCHPS_CUDA}')")
endif()

if(SKETCHPS_BACKEND STREQUAL "CUDA")
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # 'native' fails on machines without a GPU; pin explicit architectures (>= 75 for CUDA 13).
    set(CMAKE_CUDA_ARCHITECTURES 80)
  endif()
  enable_language(CUDA)
  # CMake 3.25 knows no C++20 flag for nvcc; kernels/ is C++17 on both backends (kernels/CMakeLists.txt).
  find_package(CUDAToolkit REQUIRED)
endif()

find_package(CCCL CONFIG QUIET HINTS /usr/local/cuda/lib64/cmake /usr/local/cuda/lib/cmake)
if(CCCL_FOUND)
  set(SKETCHPS_THRUST_SOURCE "CCCL ${CCCL_VERSION} (CUDA toolkit)")
else()
  if(SKETCHPS_BACKEND STREQUAL "CUDA")
    message(FATAL_ERROR "CUDA backend requested but the toolkit's CCCL package was not found")
  endif()
  find_package(Thrust CONFIG REQUIRED PATHS /usr/share/cmake/thrust)
  set(SKETCHPS_THRUST_SOURCE "Debian libthrust-dev ${Thrust_VERSION}")
endif()

if(SKETCHPS_BACKEND STREQUAL "CUDA")
  thrust_create_target(sketchps_thrust HOST CPP DEVICE CUDA)
else()
  thrust_create_target(sketchps_thrust HOST CPP DEVICE OMP)
endif()
message(STATUS "sketchps: Thrust from ${SKETCHPS_THRUST_SOURCE}")
