// Internal: the checks every kernel makes on its scratch pool and pointer arguments (kernels/backend.h, "Device
// memory checks").
//
// CheckDevicePointer(fn, name, ptr, count) is InvalidArgument "<fn>: <name> is null" when count > 0
// and ptr is null. With the checks on (PointerChecksEnabled()) it is also InvalidArgument when ptr is
// not device memory of the loaded backend: on the CPU, not inside a block that DeviceAlloc returned
// or RegisterDeviceMemory registered; on CUDA, not device or managed memory by
// cudaPointerGetAttributes. Only where the range starts is checked: a host pointer is the bug this
// finds, an overrun is compute-sanitizer's.
//
// NoteDeviceAlloc/NoteDeviceFree keep the CPU backend's registry of DeviceAlloc blocks, whether or
// not the checks are on, so that switching them on mid-run knows every block (no-ops on CUDA).
// Thread-safe.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "kernels/backend.h"

namespace sketchps::kernels::internal {

absl::Status CheckDevicePointer(const char* fn, const char* name, const void* ptr, std::size_t count);

// InvalidArgument "<fn>: exec.scratch is null" unless exec has a scratch pool (every kernel needs one).
absl::Status CheckExec(const char* fn, const Exec& exec);

// CheckExec, then CheckDevicePointer: the checks of a kernel that takes one array.
absl::Status CheckExecAndPointer(const char* fn, const Exec& exec, const char* name, const void* ptr,
                                 std::size_t count);

void NoteDeviceAlloc(const void* ptr, std::size_t bytes);
void NoteDeviceFree(const void* ptr);

}  // namespace sketchps::kernels::internal
