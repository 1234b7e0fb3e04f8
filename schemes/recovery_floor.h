// The recovery floor of the two-phase sketch methods (gs_sgd, sketched_sgd; docs/methods.md "No silent
// divergence"): how many candidates K the sketch exchange checks each round, adapted within a byte budget.
//
// Measured (docs/reports/results.md "Why the sketches diverge", "The recovery, observed"): on the CNN the sketch
// methods diverged when the candidates were fewer than about 1% of a shard, and more candidates, not a
// wider sketch, rescued gs-SGD. Divergence shows as a residual that keeps growing: what the sketch misses
// stays in error feedback, the next round's input is larger and recovers worse.
//
// The controller is a deterministic function of what every worker of a shard holds identically: the
// configuration and the round's published aggregate G_t (never a worker-local norm), so every worker
// computes the same K in every round and the phase specs agree (engine/phase.h). Its signal is the
// returned mass ||G_t||^2. With error feedback, a recovery that holds returns about what each round adds
// and that mass levels off; one that misses keeps leaving mass behind, the residual grows, and the
// candidates' exact sums (largely entries the sketch picked at random from that residual) grow with it.
//
//   budget   B = floor(budget_factor x (table + v K_configured)) bytes up per worker per round for this
//            range, table = r x c x (2 with table f16, 4 with f32), v = the bytes of one candidate value
//            on the wire (4; 2 with scheme.values f16 or bf16) (the methods table's 2rc + 4p2k);
//   cap      K_max = min(d, floor((B - table) / v)), at least K_configured;
//   floor    K_floor = ceil(recovery_floor x d): the candidates' share of the range the measured rule asks;
//   start    K_0 = min(max(K_configured, K_floor), K_max); the floor "does not fit" when K_floor > K_max;
//   rounds   W = adapt_window compressed rounds form a window; m_j, the geometric mean of its returned masses
//            (robust to one heavy-tailed round). The first window
//            after the start or after a change of K is not judged (the residual fills up, and a larger K
//            returns more by itself); the second is the reference; from then on a window whose mean is
//            more than kGrowthLimit x the previous window's (or not finite, or a round whose G_t is empty:
//            a refused, overflowing phase) is growth;
//   on growth: K = min(2 K, K_max) when K < K_max; otherwise the floor is "not held" (the budget cannot
//            hold it) until a window without growth. K never shrinks (the budget was granted).
//
// Off (no state, no change to any round) unless budget_factor > 1 or recovery_floor > 0. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "engine/scheme.h"

namespace sketchps {

// The words that open the worker's log line when the floor is not held, and the summary's message. Tools
// read the round record's typed verdict (engine/scheme.h RoundDiagnostics::floor_not_held), not the log.
inline constexpr const char* kFloorNotHeldTag = "recovery floor not held";

struct CandidatePlan {
  std::uint64_t dim = 0;          // d, the range
  std::uint64_t configured = 0;   // K from p2: min(p2 x k, d), >= 1
  std::uint64_t table_bytes = 0;  // the sketch table's bytes on the wire
  std::uint64_t value_bytes = 4;  // one candidate value's bytes on the wire (2 with scheme.values f16, bf16)
  double budget_factor = 1.0;     // >= 1
  double floor = 0.0;             // candidates' share of d, in [0, 1]; 0: none
  std::uint64_t window = 20;      // rounds per window, >= 1
};

class CandidateController {
 public:
  // The largest growth of the mean returned mass from one window to the next that counts as holding.
  // The recovery watch's residual-norm limit (tools/recovery_watch.h), here on masses of consecutive
  // windows: 1.5 is a norm growth of 22% per window.
  static constexpr double kGrowthLimit = 1.5;

  enum class Event { kNone, kRaised, kNotHeld, kHeldAgain };

  explicit CandidateController(const CandidatePlan& plan);

  bool adaptive() const { return plan_.budget_factor > 1.0 || plan_.floor > 0.0; }
  std::uint64_t candidates() const { return candidates_; }
  std::uint64_t max_candidates() const { return max_; }
  std::uint64_t floor_candidates() const { return floor_; }
  std::uint64_t budget_bytes() const { return budget_; }
  std::uint64_t bytes(std::uint64_t candidates) const { return plan_.table_bytes + plan_.value_bytes * candidates; }
  // Whether the budget affords the floor's candidates at all.
  bool floor_fits() const { return floor_ <= max_; }
  // Growth at K_max in the last judged window.
  bool not_held() const { return not_held_; }
  std::uint64_t not_held_windows() const { return not_held_windows_; }
  double last_growth() const { return last_growth_; }

  // One compressed round's returned mass ||G_t||^2 (every worker passes the same value, skipped or not).
  // Returns what changed at the end of a window.
  Event Observe(double returned_sq, bool empty);

  // The state under "<prefix>." scalars (only when adaptive()).
  void Save(SchemeState& state, const std::string& prefix) const;
  // Restores it; InvalidArgument naming the scheme when adaptive() and a scalar is missing or K is out of
  // [1, K_max].
  absl::Status Restore(const SchemeState& state, const std::string& prefix, const char* scheme);

 private:
  const CandidatePlan plan_;
  std::uint64_t budget_ = 0, max_ = 0, floor_ = 0;
  // State (saved).
  std::uint64_t candidates_ = 0;
  std::uint64_t in_window_ = 0;       // rounds in the current window
  double window_sum_ = 0;             // the sum of log(returned mass) of its finite rounds
  bool overflow_ = false;             // a round of the window returned a non-finite or empty G_t
  std::uint64_t judged_windows_ = 0;  // windows completed since the start or the last change of K
  double reference_ = 0;              // the previous window's mean
  bool not_held_ = false;
  std::uint64_t not_held_windows_ = 0;
  double last_growth_ = 0;
};

}  // namespace sketchps
