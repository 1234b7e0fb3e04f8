// Internal: a typed temporary array drawn from an Exec's Scratch and returned to it on
// destruction (no system allocation once the Scratch has warmed up). An empty array takes nothing
// from the Scratch (data() is null).
#pragma once

#include <cstddef>

#include "kernels/backend.h"

namespace sketchps::kernels::internal {

template <class T>
class ScratchArray {
 public:
  ScratchArray(Scratch& scratch, std::size_t n)
      : scratch_(scratch),
        bytes_(n * sizeof(T)),
        data_(n > 0 ? reinterpret_cast<T*>(scratch.allocate(static_cast<std::ptrdiff_t>(bytes_))) : nullptr),
        size_(n) {}
  ScratchArray(const ScratchArray&) = delete;
  ScratchArray& operator=(const ScratchArray&) = delete;
  ~ScratchArray() {
    if (data_ != nullptr) scratch_.deallocate(reinterpret_cast<char*>(data_), bytes_);
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  Scratch& scratch_;
  std::size_t bytes_;
  T* data_;
  std::size_t size_;
};

}  // namespace sketchps::kernels::internal
