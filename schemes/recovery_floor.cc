#include "schemes/recovery_floor.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace sketchps {
namespace {

constexpr double kTinyMass = 1e-300;  // a zero mass, on the log scale

}  // namespace

CandidateController::CandidateController(const CandidatePlan& plan) : plan_(plan) {
  const std::uint64_t configured = std::max<std::uint64_t>(1, std::min(plan_.configured, plan_.dim));
  const double factor = std::max(1.0, plan_.budget_factor);
  budget_ = static_cast<std::uint64_t>(std::floor(factor * static_cast<double>(bytes(configured))));
  const std::uint64_t value_bytes = std::max<std::uint64_t>(1, plan_.value_bytes);
  const std::uint64_t affordable = budget_ > plan_.table_bytes ? (budget_ - plan_.table_bytes) / value_bytes : 0;
  max_ = std::max(configured, std::min(plan_.dim, affordable));
  floor_ = plan_.floor > 0 ? static_cast<std::uint64_t>(std::ceil(plan_.floor * static_cast<double>(plan_.dim))) : 0;
  floor_ = std::min(floor_, plan_.dim);
  candidates_ = adaptive() ? std::min(std::max(configured, floor_), max_) : configured;
}

CandidateController::Event CandidateController::Observe(double returned_sq, bool empty) {
  if (!adaptive()) return Event::kNone;
  if (empty || !std::isfinite(returned_sq)) {
    overflow_ = true;
  } else {
    // The window's geometric mean: one heavy-tailed round must not read as growth.
    window_sum_ += std::log(std::max(returned_sq, kTinyMass));
  }
  if (++in_window_ < std::max<std::uint64_t>(1, plan_.window)) return Event::kNone;
  // A window with an overflowing round counts as growth (its mean is the largest double: state files
  // hold finite scalars).
  const double mean =
      overflow_ ? std::numeric_limits<double>::max() : std::exp(window_sum_ / static_cast<double>(in_window_));
  in_window_ = 0;
  window_sum_ = 0;
  overflow_ = false;
  ++judged_windows_;
  if (judged_windows_ == 1) return Event::kNone;  // settling: the residual fills up, or K just changed
  const double previous = reference_;
  reference_ = mean;
  if (judged_windows_ == 2) return Event::kNone;  // the reference
  last_growth_ = previous > 0 ? std::min(mean / previous, std::numeric_limits<double>::max())
                              : (mean > 0 ? 2 * kGrowthLimit : 1.0);
  const bool growth = mean == std::numeric_limits<double>::max() || !(mean <= kGrowthLimit * previous);
  if (!growth) {
    if (!not_held_) return Event::kNone;
    not_held_ = false;
    return Event::kHeldAgain;
  }
  if (candidates_ < max_) {
    candidates_ = std::min(2 * candidates_, max_);
    judged_windows_ = 0;
    reference_ = 0;
    not_held_ = false;
    return Event::kRaised;
  }
  ++not_held_windows_;
  if (not_held_) return Event::kNone;
  not_held_ = true;
  return Event::kNotHeld;
}

namespace {

constexpr const char* kFields[] = {"candidates", "in_window",        "window_sum",  "judged_windows", "reference",
                                   "not_held",   "not_held_windows", "last_growth", "overflow"};

}  // namespace

void CandidateController::Save(SchemeState& state, const std::string& prefix) const {
  if (!adaptive()) return;
  const double values[] = {static_cast<double>(candidates_),
                           static_cast<double>(in_window_),
                           window_sum_,
                           static_cast<double>(judged_windows_),
                           reference_,
                           not_held_ ? 1.0 : 0.0,
                           static_cast<double>(not_held_windows_),
                           last_growth_,
                           overflow_ ? 1.0 : 0.0};
  for (std::size_t i = 0; i < std::size(kFields); ++i) state.scalars[absl::StrCat(prefix, ".", kFields[i])] = values[i];
}

absl::Status CandidateController::Restore(const SchemeState& state, const std::string& prefix, const char* scheme) {
  if (!adaptive()) return absl::OkStatus();
  double values[std::size(kFields)];
  for (std::size_t i = 0; i < std::size(kFields); ++i) {
    const std::string name = absl::StrCat(prefix, ".", kFields[i]);
    const auto it = state.scalars.find(name);
    if (it == state.scalars.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          scheme, ": state has no scalar '", name,
          "' (saved without budget_factor or recovery_floor? the workers must resume with the same sizing)"));
    }
    values[i] = it->second;
  }
  const double k = values[0];
  if (!(k >= 1 && k <= static_cast<double>(max_) && k == std::floor(k))) {
    return absl::InvalidArgumentError(absl::StrCat(scheme, ": state scalar '", prefix, ".candidates' is ", k,
                                                   ", expected an integer in [1, ", max_, "]"));
  }
  candidates_ = static_cast<std::uint64_t>(k);
  in_window_ = static_cast<std::uint64_t>(values[1]);
  window_sum_ = values[2];
  judged_windows_ = static_cast<std::uint64_t>(values[3]);
  reference_ = values[4];
  not_held_ = values[5] != 0;
  not_held_windows_ = static_cast<std::uint64_t>(values[6]);
  last_growth_ = values[7];
  overflow_ = values[8] != 0;
  return absl::OkStatus();
}

}  // namespace sketchps
