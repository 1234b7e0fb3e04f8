// Backend memory and the Scratch pool. Compiled by nvcc on the CUDA backend, by the C++
// compiler (with OpenMP) on the CPU backend.
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/backend.h"
#include "kernels/internal/pointer_check.h"
#include "kernels/internal/policy.h"

#if SKETCHPS_KERNELS_CUDA
#include <cuda_runtime.h>
#else
#include <omp.h>
#endif

namespace sketchps::kernels {
namespace {

#if SKETCHPS_KERNELS_CUDA
void ThrowOnCuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
  }
}
#endif

#if !SKETCHPS_KERNELS_CUDA
constexpr std::size_t kAlignment = 64;  // a cache line; lets the compiler vectorize loads
#endif

}  // namespace

Backend ActiveBackend() { return SKETCHPS_KERNELS_CUDA ? Backend::kCuda : Backend::kCpu; }
const char* BackendName() { return SKETCHPS_KERNELS_CUDA ? "cuda" : "cpu"; }

int BackendParallelism() {
#if SKETCHPS_KERNELS_CUDA
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    return 1;
  }
  return prop.multiProcessorCount;
#else
  return omp_get_max_threads();
#endif
}

namespace {

// The file this library was loaded from (dladdr), or "?".
std::string LibraryPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&CheckBackend), &info) == 0 || info.dli_fname == nullptr) return "?";
  return info.dli_fname;
}

}  // namespace

absl::Status CheckBackend() {
#if SKETCHPS_KERNELS_CUDA
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err == cudaSuccess && devices > 0) return absl::OkStatus();
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return absl::FailedPreconditionError(absl::StrCat(
      "no CUDA device: cudaGetDeviceCount ", err == cudaSuccess ? "found 0 devices" : cudaGetErrorString(err),
      " (CUDA_VISIBLE_DEVICES ", visible == nullptr ? "unset" : absl::StrCat("= '", visible, "'"),
      "; the CUDA kernels were loaded from ", LibraryPath(),
      "). To run on the CPU, leave the lib/cuda folder off LD_LIBRARY_PATH (docs/gpu.md)"));
#else
  return absl::OkStatus();
#endif
}

bool BackendRunsOrExplain(const char* program) {
  const absl::Status st = CheckBackend();
  if (st.ok()) return true;
  std::fprintf(stderr, "%s: %s\n", program, std::string(st.message()).c_str());
  return false;
}

std::string BackendDescription() {
#if SKETCHPS_KERNELS_CUDA
  int device = 0;
  cudaDeviceProp prop{};
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    return absl::StrCat("cuda (no device) from ", LibraryPath());
  }
  return absl::StrCat("cuda (", prop.name, ", ", prop.multiProcessorCount, " SMs, ", prop.totalGlobalMem >> 20,
                      " MiB, compute ", prop.major, ".", prop.minor, ", runtime ", runtime, ", driver ", driver,
                      ") from ", LibraryPath());
#else
  return absl::StrCat("cpu (", omp_get_max_threads(), " OpenMP threads) from ", LibraryPath());
#endif
}

void* DeviceAlloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
#if SKETCHPS_KERNELS_CUDA
  void* ptr = nullptr;
  const cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it
    throw std::bad_alloc();
  }
  ThrowOnCuda(err, "cudaMalloc");  // a fault of an earlier kernel, say: not a lack of memory
  return ptr;
#else
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded);
  if (ptr == nullptr) throw std::bad_alloc();
  internal::NoteDeviceAlloc(ptr, rounded);
  return ptr;
#endif
}

void DeviceFree(void* ptr) {
  if (ptr == nullptr) return;
#if SKETCHPS_KERNELS_CUDA
  cudaFree(ptr);
#else
  internal::NoteDeviceFree(ptr);
  std::free(ptr);
#endif
}

namespace {
std::atomic<std::uint64_t> copied_to_device{0}, copied_to_host{0};  // BytesCopied()
}  // namespace

CopiedBytes BytesCopied() {
  return CopiedBytes{copied_to_device.load(std::memory_order_relaxed), copied_to_host.load(std::memory_order_relaxed)};
}

void CopyToDevice(void* d_dst, const void* h_src, std::size_t bytes) {
  if (bytes == 0) return;
  copied_to_device.fetch_add(bytes, std::memory_order_relaxed);
#if SKETCHPS_KERNELS_CUDA
  ThrowOnCuda(cudaMemcpy(d_dst, h_src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
#else
  std::memcpy(d_dst, h_src, bytes);
#endif
}

void CopyToHost(void* h_dst, const void* d_src, std::size_t bytes) {
  if (bytes == 0) return;
  copied_to_host.fetch_add(bytes, std::memory_order_relaxed);
#if SKETCHPS_KERNELS_CUDA
  ThrowOnCuda(cudaMemcpy(h_dst, d_src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
#else
  std::memcpy(h_dst, d_src, bytes);
#endif
}

void DeviceMemset(void* d_dst, int value, std::size_t bytes) {
  if (bytes == 0) return;
#if SKETCHPS_KERNELS_CUDA
  ThrowOnCuda(cudaMemset(d_dst, value, bytes), "cudaMemset");
#else
  std::memset(d_dst, value, bytes);
#endif
}

void Synchronize(const Exec& exec) {
#if SKETCHPS_KERNELS_CUDA
  ThrowOnCuda(cudaStreamSynchronize(static_cast<cudaStream_t>(exec.stream)), "cudaStreamSynchronize");
#endif
}

Scratch::~Scratch() { Release(); }

char* Scratch::allocate(std::ptrdiff_t bytes) {
  const auto want = static_cast<std::size_t>(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = free_blocks_.lower_bound(want);
  if (it != free_blocks_.end()) {
    char* block = it->second;
    used_blocks_[block] = it->first;
    free_blocks_.erase(it);
    return block;
  }
  char* block = static_cast<char*>(DeviceAlloc(want == 0 ? 1 : want));
  ++system_allocations_;
  held_bytes_ += want;
  used_blocks_[block] = want;
  return block;
}

void Scratch::deallocate(char* ptr, std::size_t /*bytes*/) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = used_blocks_.find(ptr);
  if (it == used_blocks_.end()) return;  // not ours; Thrust never does this
  free_blocks_.emplace(it->second, ptr);
  used_blocks_.erase(it);
}

std::size_t Scratch::HeldBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_bytes_;
}

std::size_t Scratch::SystemAllocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return system_allocations_;
}

void Scratch::Release() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [size, block] : free_blocks_) DeviceFree(block);
  for (auto& [block, size] : used_blocks_) DeviceFree(block);
  free_blocks_.clear();
  used_blocks_.clear();
  held_bytes_ = 0;
}

}  // namespace sketchps::kernels
