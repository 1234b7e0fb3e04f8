#include "schemes/error_feedback.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/select.h"
#include "kernels/sparse.h"
#include "kernels/vector_ops.h"

namespace sketchps {

absl::Status Selection::SelectTopK(const float* d_x, std::uint64_t n, std::uint64_t k, const kernels::Exec& exec) {
  if (std::min(k, n) > capacity()) {
    return absl::InvalidArgumentError(absl::StrCat("selection of ", k, " exceeds capacity ", capacity()));
  }
  SKETCHPS_ASSIGN_OR_RETURN(count_, kernels::TopK(d_x, n, k, idx(), val(), exec));
  return kernels::SortByIndex(idx(), val(), count_, exec);
}

absl::Status Selection::SelectAbove(const float* d_x, std::uint64_t n, float tau, const kernels::Exec& exec) {
  SKETCHPS_ASSIGN_OR_RETURN(count_, kernels::ThresholdSelect(d_x, n, tau, capacity(), idx(), val(), exec));
  return absl::OkStatus();
}

absl::Status Selection::GatherAt(const std::vector<std::uint32_t>& indices, const float* d_x, std::uint64_t n,
                                 const kernels::Exec& exec) {
  if (indices.size() > capacity()) {
    return absl::InvalidArgumentError(absl::StrCat("index set of ", indices.size(), " exceeds capacity ", capacity()));
  }
  kernels::CopyToDevice(idx(), indices.data(), indices.size() * sizeof(std::uint32_t));
  count_ = indices.size();
  return kernels::Gather(d_x, n, idx(), count_, val(), exec);
}

SparseVector Selection::ToSparse(std::uint64_t dim) const { return SparseVector{dim, HostIndices(), HostValues()}; }

std::vector<std::uint32_t> Selection::HostIndices() const { return idx_.ToHost(count_); }

std::vector<float> Selection::HostValues() const { return val_.ToHost(count_); }

ErrorFeedback::ErrorFeedback(std::uint64_t dim) : e_(dim) { e_.Zero(); }

absl::StatusOr<const float*> ErrorFeedback::Accumulate(const float* d_grad, const kernels::Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(kernels::Axpy(1.0f, d_grad, e_.data(), e_.size(), exec));
  return static_cast<const float*>(e_.data());
}

absl::Status ErrorFeedback::Take(const Selection& sent, const kernels::Exec& exec) {
  return kernels::FillAt(e_.data(), e_.size(), sent.idx(), sent.count(), 0.0f, exec);
}

absl::Status ErrorFeedback::FromHost(const std::vector<float>& host) {
  if (host.size() != e_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("residual has ", host.size(), " values, expected ", e_.size()));
  }
  e_.FromHost(host);
  return absl::OkStatus();
}

}  // namespace sketchps
