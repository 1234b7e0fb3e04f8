// SchemeBase: what every scheme shares (see scheme.h): dense warm-up rounds, the NaN/Inf guard and
// sitting out (RoundInfo::sits_out: handled as that guard's skip, without reading the gradient),
// keeping the round's phase results, and averaging by the number of contributors.
//
// A concrete scheme implements four hooks:
//   Accumulate(info, d_grad)   fold the gradient into the compression input (e.g. a = e + g) and
//                              return it (ctx.dim floats, device memory owned by the scheme);
//   Spec(phase)                the reduction of each compressed phase (known even when skipping);
//   Payload(phase, results)    this worker's payload, given the results of the earlier phases;
//   Update(aggregate, results) the state change after a compressed round it took part in.
// G_t is always MeanAggregate(final result) (phase.h), so a worker that skipped the round, and the
// server's master copy, compute the same aggregate.
// plus OnDenseSent() (the whole input was sent in a warm-up round) and the state accessors.
// A scheme that keeps a residual (error feedback, momentum accumulation) returns it from
// residual_data() so that diagnostics() reports its norm.
//
// Values on the wire (ctx.values, the job key scheme.values: f32, f16 or bf16; docs/methods.md
// "Values on the wire"): Contribute rounds the dense and sparse values of every payload this worker
// pushes (warm-up rounds included) to that format, nearest even, and marks the contribution with it
// (Contribution::values), so they travel in 2 bytes each and RunRound counts 2 bytes per value.
// Sketch tables keep their own `table` key and index sets carry no values. Values beyond the
// format's largest finite value (f16: 65504) are left as they are and that payload travels, and is
// counted, as f32. Receivers sum in float32; phase results travel back as float32.
// Decision: the rounding error is NOT fed back into an error-feedback residual. Schemes differ in
// what their residual keeps of a sent value (top-k zeroes exactly the sent entries; gs-SGD sends
// values at every candidate but zeroes only the taken ones; DGC, SDAGC and Sketched-SGD keep
// momentum-corrected accumulators), so one rule here would double-count for some of them. The
// residual therefore stays what it is with f32 values ("sent + residual == input" holds with the
// values before rounding), and the round drops at most 2^-9 (bf16) or 2^-12 (f16) of each sent
// value, as DDP's bf16_compress_hook does. The diagnostic phase below is exact and stays f32.
//
// Rounds left out (ctx.may_be_left_out; engine/phase_table.h "Round deadline"): BeginRound copies the
// state (SaveState) before it accumulates; FinishExcluded restores that copy and keeps the round's
// gradient in carry_, which the next BeginRound adds to its gradient. For error-feedback schemes this
// is the same as keeping the gradient in the residual (their input is e + g either way); for dense and
// FetchSGD, which keep no residual, it is what keeps the late gradient. A non-finite gradient is
// skipped and leaves the carry as it is; so does a round the worker sits out.
//
// With ctx.diagnostics, a compressed round gets one more phase first: a dense sum of every worker's
// input (the exact aggregate). The scheme's own phases follow unchanged (its phase p is the round's
// phase p + 1) and never see that result; Finish compares G_t with it (schemes/recovery_check.h).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/scheme.h"
#include "kernels/backend.h"

namespace sketchps {

using PhaseResults = std::vector<std::shared_ptr<const PhaseResult>>;

class SchemeBase : public Scheme {
 public:
  absl::Status BeginRound(const RoundInfo& info, const float* d_grad) final;
  std::uint32_t NumPhases() const final;
  std::uint32_t PhasesIn(std::uint64_t round) const final;
  absl::StatusOr<Contribution> Contribute(std::uint32_t phase, const PhaseResult* previous) final;
  absl::StatusOr<Aggregate> Finish(const PhaseResult& last) final;
  absl::StatusOr<Aggregate> FinishExcluded(const PhaseResult& last) final;
  absl::Status ObserveFetched(std::uint64_t round, const Aggregate& g) final;
  std::vector<float> CarriedGradient() const final;
  absl::Status RestoreCarriedGradient(const std::vector<float>& carried) final;
  bool skipped() const final { return skipped_; }
  std::uint64_t selected() const final { return selected_; }
  RoundDiagnostics diagnostics() const final { return diag_; }

 protected:
  explicit SchemeBase(SchemeContext ctx);

  virtual absl::StatusOr<const float*> Accumulate(const RoundInfo& info, const float* d_grad) = 0;
  virtual std::uint32_t CompressedPhases() const = 0;
  virtual PhaseSpec Spec(std::uint32_t phase) const = 0;
  virtual absl::StatusOr<PayloadValue> Payload(std::uint32_t phase, const PhaseResults& earlier) = 0;
  virtual absl::Status Update(const Aggregate& aggregate, const PhaseResults& results) = 0;
  virtual void OnDenseSent() = 0;
  // After every compressed round's G_t, whether this worker skipped the round or not (before Update):
  // for state that must follow what every worker holds identically (the sketch methods' recovery floor).
  virtual void OnAggregate(const Aggregate& /*aggregate*/) {}
  // The residual the scheme keeps between rounds (ctx.dim device floats), or nullptr.
  virtual const float* residual_data() const { return nullptr; }

  const SchemeContext& ctx() const { return ctx_; }
  const kernels::Exec& exec() const { return exec_; }
  const RoundInfo& round() const { return round_; }
  bool dense_round() const { return dense_round_; }
  void set_selected(std::uint64_t n) { selected_ = n; }
  // From OnAggregate: the recovery floor was found not held at this round on this shard, the returned
  // mass having grown by `growth` (RoundDiagnostics::floor_not_held).
  void NoteFloorNotHeld(double growth) {
    diag_.floor_not_held = 1;
    diag_.floor_growth = growth;
  }

  // Copies n device floats to a host vector.
  std::vector<float> ToHost(const float* d_x, std::size_t n) const;

 private:
  // 1 when this round starts with the diagnostic phase (ctx.diagnostics, compressed round), else 0.
  std::uint32_t diagnostic_phases() const { return ctx_.diagnostics && !dense_round_ ? 1 : 0; }
  absl::Status Diagnose(const Aggregate& g);

  const SchemeContext ctx_;
  kernels::Scratch scratch_;
  kernels::Exec exec_;

  RoundInfo round_;
  bool dense_round_ = false;
  bool skipped_ = false;
  std::uint64_t selected_ = 0;
  const float* input_ = nullptr;              // this round's compression input (dense rounds send it whole)
  PhaseResults results_;                      // the scheme's own phases' results
  std::shared_ptr<const PhaseResult> exact_;  // the diagnostic phase's result
  RoundDiagnostics diag_;

  // ctx.may_be_left_out: the state before this round (restored by FinishExcluded), and the gradient
  // of rounds left out, added to the next round's (not part of SaveState; a worker's state file keeps
  // it through CarriedGradient).
  SchemeState before_;
  kernels::DeviceArray<float> carry_;
  bool carrying_ = false;
  const float* grad_ = nullptr;  // this round's gradient (d_grad, or carry_ holding d_grad + the carry)
};

}  // namespace sketchps
