// The kernel backend: where kernels run and where their buffers live.
//
// sketchps kernels are written once against Thrust and built as one shared library per backend,
// with one soname (kernels/CMakeLists.txt; CUDA only when CMake option SKETCHPS_CUDA finds nvcc); a
// process runs on the one it loads:
//   CPU   Thrust's OpenMP device system, compiled by the C++ compiler; "device" memory is host memory.
//   CUDA  the same sources compiled by nvcc; device memory is GPU memory.
//
// Every kernel entry point takes an `Exec`: the stream (null, the default one: another is refused,
// since copies and the reuse of scratch blocks are ordered by that one stream) and a `Scratch` that
// provides temporary storage. Kernels never allocate on their own: Thrust's temporaries come
// from the Scratch, which caches blocks, so after the first call of a given size a hot loop performs
// no system allocation. Pointers passed to kernels (named d_*) must be device pointers for the
// active backend; on the CPU backend any host pointer is a device pointer.
//
// Thread-safety: allocate/deallocate are internally locked (Thrust's OpenMP backend may request
// temporaries from several threads of one algorithm), but an Exec should still drive one kernel call
// at a time. Distinct Exec objects may be used concurrently.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace sketchps::kernels {

enum class Backend { kCpu, kCuda };

// The backend this library was built for.
Backend ActiveBackend();
// "cpu" or "cuda".
const char* BackendName();
// Threads (CPU) or streaming multiprocessors x 1 (CUDA) the backend runs on; 1 if unknown.
int BackendParallelism();
// OK when the backend can run here: always on the CPU; on CUDA when a device answers. Otherwise
// FailedPrecondition that says what was looked for and how to run on the CPU instead, e.g.
// "no CUDA device: cudaGetDeviceCount: no CUDA-capable device is detected (CUDA_VISIBLE_DEVICES
// unset; the CUDA kernels were loaded from .../lib/cuda/libsketchps_kernels.so) ...".
absl::Status CheckBackend();
// CheckBackend for a binary's main: true when it is OK; otherwise prints "<program>: <message>" to
// stderr and returns false (the binary then exits 2, before it allocates anything).
bool BackendRunsOrExplain(const char* program);
// One line for logs: the backend, its device or threads, and the library file it was loaded from.
std::string BackendDescription();

// A caching pool of temporary device storage. Thrust algorithms draw their temporaries from it.
// Blocks are kept after use and reused for requests of the same or smaller size; Release() frees
// everything. allocate/deallocate are thread-safe; Release() must not race with them.
class Scratch {
 public:
  using value_type = char;

  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch();

  // Allocator interface used by Thrust (thrust::*::par(scratch)). Throws std::bad_alloc on failure.
  char* allocate(std::ptrdiff_t bytes);
  void deallocate(char* ptr, std::size_t bytes);

  // Frees every cached block. Must not be called while a kernel using this Scratch is running.
  void Release();
  // Bytes currently held (cached or in use).
  std::size_t HeldBytes() const;
  // Number of system allocations made so far; tests use it to prove hot loops do not allocate.
  std::size_t SystemAllocations() const;

 private:
  mutable std::mutex mu_;
  std::multimap<std::size_t, char*> free_blocks_;  // size -> block
  std::map<char*, std::size_t> used_blocks_;       // block -> size
  std::size_t held_bytes_ = 0;
  std::size_t system_allocations_ = 0;
};

// Execution context of one kernel call. The scratch pool is required: without one every kernel
// returns InvalidArgument "<kernel>: exec.scratch is null" before it queues any work.
struct Exec {
  void* stream = nullptr;      // must stay null, the default stream (any other is InvalidArgument)
  Scratch* scratch = nullptr;  // required
};

// Raw backend memory operations (device memory on CUDA, host memory on CPU).
// DeviceAlloc throws std::bad_alloc when memory runs out (CUDA: std::runtime_error with CUDA's
// message for any other error, such as an earlier kernel's fault); copies are synchronous.
void* DeviceAlloc(std::size_t bytes);
void DeviceFree(void* ptr);
void CopyToDevice(void* d_dst, const void* h_src, std::size_t bytes);
void CopyToHost(void* h_dst, const void* d_src, std::size_t bytes);
void DeviceMemset(void* d_dst, int value, std::size_t bytes);

// The bytes CopyToDevice and CopyToHost (so DeviceArray and CopyOut too) have copied in this
// process, every thread together: what crossed between host and device memory (on the CPU
// backend, the same copies within host memory). A worker's round records report the difference.
struct CopiedBytes {
  std::uint64_t to_device = 0;
  std::uint64_t to_host = 0;
};
CopiedBytes BytesCopied();
// Waits until all work queued on the stream has finished (no-op on CPU).
void Synchronize(const Exec& exec);

// Device memory checks. With the checks on, every kernel refuses a pointer argument that is not
// device memory of the loaded backend, with InvalidArgument naming the kernel and the argument
// ("TopK: d_x (0x...) is not device memory of the cpu kernels ..."). On the CPU backend, device
// memory is what DeviceAlloc returned (DeviceArray, Scratch) and what RegisterDeviceMemory
// registered (a caller's own buffers, such as the Python package's torch tensors), so a CPU run
// finds the host pointers that would be illegal addresses on a GPU. On CUDA,
// cudaPointerGetAttributes decides (device or managed memory) and the registry is not consulted.
// Off, a kernel checks for null only. The checks start on when SKETCHPS_KERNELS_CHECK_POINTERS=1 is
// in the environment (the tests' CTest environment sets it); SetPointerChecks switches them.
bool PointerChecksEnabled();
void SetPointerChecks(bool on);
// Registers [ptr, ptr + bytes) as device memory for the checks until UnregisterDeviceMemory(ptr).
// Thread-safe. Registering costs a map insertion whether or not the checks are on.
void RegisterDeviceMemory(const void* ptr, std::size_t bytes);
void UnregisterDeviceMemory(const void* ptr);

// RegisterDeviceMemory for the lifetime of the object. Move-only.
class DeviceMemoryRegistration {
 public:
  DeviceMemoryRegistration() = default;
  DeviceMemoryRegistration(const void* ptr, std::size_t bytes) : ptr_(ptr) { RegisterDeviceMemory(ptr, bytes); }
  DeviceMemoryRegistration(DeviceMemoryRegistration&& other) noexcept : ptr_(other.ptr_) { other.ptr_ = nullptr; }
  DeviceMemoryRegistration& operator=(DeviceMemoryRegistration&& other) noexcept {
    if (this != &other) {
      UnregisterDeviceMemory(ptr_);
      ptr_ = other.ptr_;
      other.ptr_ = nullptr;
    }
    return *this;
  }
  DeviceMemoryRegistration(const DeviceMemoryRegistration&) = delete;
  DeviceMemoryRegistration& operator=(const DeviceMemoryRegistration&) = delete;
  ~DeviceMemoryRegistration() { UnregisterDeviceMemory(ptr_); }

 private:
  const void* ptr_ = nullptr;
};

// A host copy of the n elements at d_src.
template <class T>
std::vector<T> CopyOut(const T* d_src, std::size_t n) {
  std::vector<T> out(n);
  CopyToHost(out.data(), d_src, n * sizeof(T));
  return out;
}

// An owning array in backend memory. Move-only.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t n) : data_(n ? static_cast<T*>(DeviceAlloc(n * sizeof(T))) : nullptr), size_(n) {}
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { FromHost(host); }
  DeviceArray(DeviceArray&& other) noexcept : data_(other.data_), size_(other.size_) {
    other.data_ = nullptr;
    other.size_ = 0;
  }
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    if (this != &other) {
      DeviceFree(data_);
      data_ = other.data_;
      size_ = other.size_;
      other.data_ = nullptr;
      other.size_ = 0;
    }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { DeviceFree(data_); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }

  // Copies host.size() elements (at most size()) into the front of the array.
  void FromHost(const std::vector<T>& host) {
    CopyToDevice(data_, host.data(), std::min(host.size(), size_) * sizeof(T));
  }
  std::vector<T> ToHost() const { return ToHost(size_); }
  // The first n elements (n <= size()).
  std::vector<T> ToHost(std::size_t n) const {
    std::vector<T> out(std::min(n, size_));
    CopyToHost(out.data(), data_, out.size() * sizeof(T));
    return out;
  }
  void Zero() { DeviceMemset(data_, 0, size_ * sizeof(T)); }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace sketchps::kernels
