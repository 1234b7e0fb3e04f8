// The device memory checks (kernels/backend.h; kernels/internal/pointer_check.h). Compiled by nvcc
// on the CUDA backend, by the C++ compiler on the CPU backend.
#include "kernels/internal/pointer_check.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "kernels/backend.h"

#if SKETCHPS_KERNELS_CUDA
#include <cuda_runtime.h>
#endif

namespace sketchps::kernels {
namespace {

constexpr const char* kVariable = "SKETCHPS_KERNELS_CHECK_POINTERS";

// The CPU backend's device memory: block start -> bytes.
struct Registry {
  std::shared_mutex mu;  // lookups (every kernel call) share it; registrations are rare
  std::map<std::uintptr_t, std::size_t> blocks;
};

Registry& TheRegistry() {
  static auto* registry = new Registry;  // never destroyed: DeviceFree may run during exit
  return *registry;
}

#if !SKETCHPS_KERNELS_CUDA
bool Registered(const void* ptr) {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  Registry& r = TheRegistry();
  std::shared_lock<std::shared_mutex> lock(r.mu);
  auto it = r.blocks.upper_bound(p);
  if (it == r.blocks.begin()) return false;
  --it;
  return p < it->first + it->second;
}
#endif

#if SKETCHPS_KERNELS_CUDA
// Whether ptr is device or managed memory. CUDA calls plain host memory unregistered and answers
// cudaErrorInvalidValue for a pointer it cannot place; any other error is the device's (a sticky
// fault of an earlier kernel), which is reported as that, not blamed on this pointer.
absl::StatusOr<bool> OnCudaDevice(const char* fn, const void* ptr) {
  cudaPointerAttributes attributes{};
  const cudaError_t err = cudaPointerGetAttributes(&attributes, ptr);
  if (err == cudaErrorInvalidValue) {
    cudaGetLastError();  // not sticky: clear it
    return false;
  }
  if (err != cudaSuccess) {
    return absl::InternalError(absl::StrCat(fn, ": the device memory check's cudaPointerGetAttributes failed: ",
                                            cudaGetErrorString(err), " (an error of an earlier CUDA call)"));
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}
#endif

std::atomic<bool>& Enabled() {
  static std::atomic<bool> enabled = [] {
    const char* value = std::getenv(kVariable);
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return enabled;
}

}  // namespace

bool PointerChecksEnabled() { return Enabled().load(std::memory_order_relaxed); }

void SetPointerChecks(bool on) { Enabled().store(on, std::memory_order_relaxed); }

void RegisterDeviceMemory(const void* ptr, std::size_t bytes) {
  if (ptr == nullptr || bytes == 0) return;
  Registry& r = TheRegistry();
  std::unique_lock<std::shared_mutex> lock(r.mu);
  r.blocks[reinterpret_cast<std::uintptr_t>(ptr)] = bytes;
}

void UnregisterDeviceMemory(const void* ptr) {
  if (ptr == nullptr) return;
  Registry& r = TheRegistry();
  std::unique_lock<std::shared_mutex> lock(r.mu);
  r.blocks.erase(reinterpret_cast<std::uintptr_t>(ptr));
}

namespace internal {

void NoteDeviceAlloc(const void* ptr, std::size_t bytes) {
  if (ActiveBackend() == Backend::kCpu) RegisterDeviceMemory(ptr, bytes);
}

void NoteDeviceFree(const void* ptr) {
  if (ActiveBackend() == Backend::kCpu) UnregisterDeviceMemory(ptr);
}

absl::Status CheckDevicePointer(const char* fn, const char* name, const void* ptr, std::size_t count) {
  if (count == 0) return absl::OkStatus();
  if (ptr == nullptr) return absl::InvalidArgumentError(absl::StrCat(fn, ": ", name, " is null"));
  if (!PointerChecksEnabled()) return absl::OkStatus();
#if SKETCHPS_KERNELS_CUDA
  SKETCHPS_ASSIGN_OR_RETURN(const bool on_device, OnCudaDevice(fn, ptr));
#else
  const bool on_device = Registered(ptr);
#endif
  if (on_device) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: %s (%p) is not device memory of the %s kernels (%s=1 checks every kernel's pointers; on a GPU "
      "this pointer would be an illegal address)",
      fn, name, ptr, BackendName(), kVariable));
}

absl::Status CheckExec(const char* fn, const Exec& exec) {
  if (exec.scratch == nullptr) return absl::InvalidArgumentError(absl::StrCat(fn, ": exec.scratch is null"));
  // CUDA's copies and the reuse of scratch blocks are ordered by one stream, the legacy default one
  // (kernels/backend.h Exec); the CPU backend has none and refuses another all the same.
  if (exec.stream != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(fn,
                                                   ": exec.stream is not the default stream (null); the "
                                                   "kernels run on the default stream only"));
  }
  return absl::OkStatus();
}

absl::Status CheckExecAndPointer(const char* fn, const Exec& exec, const char* name, const void* ptr,
                                 std::size_t count) {
  SKETCHPS_RETURN_IF_ERROR(CheckExec(fn, exec));
  return CheckDevicePointer(fn, name, ptr, count);
}

}  // namespace internal
}  // namespace sketchps::kernels
