// LocalMomentumScheme: the skeleton DGC and SDAGC share. Local momentum correction (LocalMomentum)
// accumulates v each round; one sparse-sum phase sends the entries that the subclass's Select()
// puts in sel_ (index order); a dense warm-up round resets v. The replicated optimizer runs with
// momentum 0. Subclasses implement Select() (which also calls set_selected) and Update(), and add
// state to SaveState/RestoreState where they have more.
// Internal to schemes/*.cc.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kernels/stats.h"
#include "schemes/error_feedback.h"
#include "schemes/local_momentum.h"
#include "schemes/scheme_base.h"

namespace sketchps {

class LocalMomentumScheme : public SchemeBase {
 public:
  bool uses_global_momentum() const override { return false; }
  SchemeState SaveState() const override {
    SchemeState state;
    lm_.Save(state);
    return state;
  }
  absl::Status RestoreState(const SchemeState& state) override { return lm_.Restore(state); }

 protected:
  // `init`: the outcome of planning the scheme; when not OK every round fails with it. `layers` are
  // the clipping scopes (LocalMomentum), `capacity` the most entries one round may select.
  LocalMomentumScheme(const SchemeContext& ctx, absl::Status init, std::vector<kernels::Segment> layers,
                      const LocalMomentumOptions& momentum, std::uint64_t capacity)
      : SchemeBase(ctx),
        init_(std::move(init)),
        lm_(ctx.dim, std::move(layers), ctx.num_workers, momentum),
        sel_(capacity) {}

  // Fills sel_ from lm_.velocity() in index order and records the count with set_selected.
  virtual absl::Status Select() = 0;

  absl::StatusOr<const float*> Accumulate(const RoundInfo&, const float* d_grad) override {
    SKETCHPS_RETURN_IF_ERROR(init_);
    return lm_.Accumulate(d_grad, exec());
  }
  std::uint32_t CompressedPhases() const override { return 1; }
  PhaseSpec Spec(std::uint32_t) const override { return {Reduction::kSparseSum}; }
  absl::StatusOr<PayloadValue> Payload(std::uint32_t, const PhaseResults&) override {
    SKETCHPS_RETURN_IF_ERROR(Select());
    return sel_.ToSparse(ctx().dim);
  }
  void OnDenseSent() override { lm_.ResetAccumulated(); }
  const float* residual_data() const override { return lm_.velocity(); }

  absl::Status init_;
  LocalMomentum lm_;
  Selection sel_;
};

}  // namespace sketchps
