#include "schemes/gtopk.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/sparse.h"
#include "schemes/scheme_base.h"

namespace sketchps {

absl::Status GTopKConfig::Validate(const std::string&) const { return absl::OkStatus(); }

absl::Status GTopKConfig::Read(ConfigReader& section) { return section.FinishAndValidate(*this); }

GTopKWorker::GTopKWorker(std::uint64_t dim, std::uint64_t k)
    : k_(std::min(k, dim)), ef_(dim), sel_(k_), back_idx_(k_), back_val_(k_) {}

absl::StatusOr<const float*> GTopKWorker::Accumulate(const float* d_grad, const kernels::Exec& exec) {
  return ef_.Accumulate(d_grad, exec);
}

absl::StatusOr<SparseVector> GTopKWorker::SelectLocal(const kernels::Exec& exec) {
  SKETCHPS_RETURN_IF_ERROR(sel_.SelectTopK(ef_.data(), ef_.dim(), k_, exec));
  SKETCHPS_RETURN_IF_ERROR(ef_.Take(sel_, exec));
  sent_ = sel_.ToSparse(ef_.dim());
  return sent_;
}

absl::Status GTopKWorker::PutBack(const std::vector<std::uint32_t>& global, const kernels::Exec& exec) {
  // Set difference of two index-sorted host lists (the worker's own payload and the phase result).
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
  std::size_t g = 0;
  for (std::size_t i = 0; i < sent_.idx.size(); ++i) {
    while (g < global.size() && global[g] < sent_.idx[i]) ++g;
    if (g < global.size() && global[g] == sent_.idx[i]) continue;
    idx.push_back(sent_.idx[i]);
    val.push_back(sent_.val[i]);
  }
  if (idx.empty()) return absl::OkStatus();
  back_idx_.FromHost(idx);
  back_val_.FromHost(val);
  return kernels::ScatterAdd(back_idx_.data(), back_val_.data(), idx.size(), ef_.data(), ef_.dim(), exec);
}

namespace {

class GTopKScheme final : public SchemeBase {
 public:
  explicit GTopKScheme(SchemeContext ctx) : SchemeBase(ctx), worker_(ctx.dim, ctx.k) {}

  const char* name() const override { return "gtopk"; }
  bool uses_global_momentum() const override { return true; }
  SchemeState SaveState() const override { return {{{"residual", worker_.residual().ToHost()}}, {}}; }
  absl::Status RestoreState(const SchemeState& state) override {
    const auto it = state.arrays.find("residual");
    if (it == state.arrays.end()) return absl::InvalidArgumentError("gtopk state: missing array 'residual'");
    return worker_.residual().FromHost(it->second);
  }

 protected:
  absl::StatusOr<const float*> Accumulate(const RoundInfo&, const float* d_grad) override {
    return worker_.Accumulate(d_grad, exec());
  }
  std::uint32_t CompressedPhases() const override { return 1; }
  PhaseSpec Spec(std::uint32_t) const override { return {Reduction::kSparseSum, ctx().k}; }
  absl::StatusOr<PayloadValue> Payload(std::uint32_t, const PhaseResults&) override {
    SKETCHPS_ASSIGN_OR_RETURN(SparseVector sent, worker_.SelectLocal(exec()));
    set_selected(sent.idx.size());
    return PayloadValue{std::move(sent)};
  }
  absl::Status Update(const Aggregate&, const PhaseResults& results) override {
    const std::vector<std::uint32_t>* global = ResultIndices(*results.back());
    if (global == nullptr) return absl::InvalidArgumentError("gtopk: the phase result carries no index set");
    return worker_.PutBack(*global, exec());
  }
  void OnDenseSent() override { worker_.Reset(); }
  const float* residual_data() const override { return worker_.residual().data(); }

 private:
  GTopKWorker worker_;
};

}  // namespace

std::unique_ptr<Scheme> MakeGTopKScheme(SchemeContext ctx, const GTopKConfig&) {
  return std::make_unique<GTopKScheme>(std::move(ctx));
}

}  // namespace sketchps
