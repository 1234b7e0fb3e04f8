// Host vectors handed to code that takes the kernels' device memory (the CPU kernels read host
// memory): registered for the kernels' device memory checks, which every test process runs with
// (tests/test_main.cc, kernels/backend.h). Only for tests that run on the CPU kernels: on a GPU a
// host vector is not device memory, registered or not.
#pragma once

#include <vector>

#include "kernels/backend.h"

namespace sketchps::testing {

// Registers v's elements until the returned object goes; v must not reallocate meanwhile.
template <class T>
kernels::DeviceMemoryRegistration AsDeviceMemory(const std::vector<T>& v) {
  return kernels::DeviceMemoryRegistration(v.data(), v.size() * sizeof(T));
}

}  // namespace sketchps::testing
