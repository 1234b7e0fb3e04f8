// Error feedback ("residual accumulation") and selections: the building blocks most schemes share.
//
// ErrorFeedback keeps a residual e of ctx.dim floats (device memory). Accumulate(g) turns it into
// a = e + g in place and returns a. Take(selection) sends a at the selected indices and zeroes them,
// so that, exactly, sent + residual == a (values are moved, never recomputed).
//
// Selection holds this worker's chosen (index, value) pairs in device memory, index-sorted.
// Neither class is thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/payload.h"
#include "kernels/backend.h"

namespace sketchps {

class Selection {
 public:
  explicit Selection(std::uint64_t capacity) : idx_(capacity), val_(capacity) {}

  std::uint32_t* idx() { return idx_.data(); }
  float* val() { return val_.data(); }
  const std::uint32_t* idx() const { return idx_.data(); }
  const float* val() const { return val_.data(); }
  std::uint64_t capacity() const { return idx_.size(); }
  std::uint64_t count() const { return count_; }
  void set_count(std::uint64_t n) { count_ = n; }

  // Selects the k largest |d_x| (ties by index) and sorts the selection by index.
  absl::Status SelectTopK(const float* d_x, std::uint64_t n, std::uint64_t k, const kernels::Exec& exec);
  // Selects every |d_x| > tau in index order. ResourceExhausted when more than capacity() qualify.
  absl::Status SelectAbove(const float* d_x, std::uint64_t n, float tau, const kernels::Exec& exec);
  // Loads a host index set (strictly increasing) and gathers d_x at it.
  absl::Status GatherAt(const std::vector<std::uint32_t>& indices, const float* d_x, std::uint64_t n,
                        const kernels::Exec& exec);

  // The selection as a wire payload over a range of `dim` entries.
  SparseVector ToSparse(std::uint64_t dim) const;
  std::vector<std::uint32_t> HostIndices() const;
  std::vector<float> HostValues() const;

 private:
  kernels::DeviceArray<std::uint32_t> idx_;
  kernels::DeviceArray<float> val_;
  std::uint64_t count_ = 0;
};

class ErrorFeedback {
 public:
  explicit ErrorFeedback(std::uint64_t dim);

  // e <- e + g; returns e (now a).
  absl::StatusOr<const float*> Accumulate(const float* d_grad, const kernels::Exec& exec);
  // Zeroes e at the selection's indices (their values were sent).
  absl::Status Take(const Selection& sent, const kernels::Exec& exec);
  // e <- 0 (after a dense round sent everything).
  void Reset() { e_.Zero(); }

  float* data() { return e_.data(); }
  const float* data() const { return e_.data(); }
  std::uint64_t dim() const { return e_.size(); }
  std::vector<float> ToHost() const { return e_.ToHost(); }
  absl::Status FromHost(const std::vector<float>& host);

 private:
  kernels::DeviceArray<float> e_;
};

}  // namespace sketchps
