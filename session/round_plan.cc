#include "session/round_plan.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace sketchps::session {
namespace {

absl::Status CheckWorkers(const JobSpec& job, std::uint32_t workers, std::uint32_t rank) {
  if (workers == 0 || rank >= workers) {
    return absl::InvalidArgumentError(absl::StrCat("round plan: rank ", rank, " is not in [0, ", workers, ")"));
  }
  if (job.data.train_samples < std::uint64_t{workers} * job.data.batch_size * job.train.local_steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.train_samples: ", job.data.train_samples, " < ", workers, " workers * batch_size ", job.data.batch_size,
        job.train.local_steps > 1 ? absl::StrCat(" * train.local_steps ", job.train.local_steps) : ""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RoundPlan> RoundPlan::Initial(const JobSpec& job, std::uint32_t rank) {
  if (auto st = CheckWorkers(job, job.workers, rank); !st.ok()) return st;
  RoundPlan p;
  p.workers = job.workers;
  p.rank = rank;
  p.samples = job.data.train_samples;
  p.batch = job.data.batch_size;
  p.local_steps = std::max<std::uint64_t>(1, job.train.local_steps);
  p.last_round = job.total_rounds();
  return p;
}

absl::StatusOr<RoundPlan> RoundPlan::Continue(const JobSpec& job, std::uint64_t at, std::uint32_t workers,
                                              std::uint32_t rank) const {
  if (at < first_round) {
    return absl::InvalidArgumentError(
        absl::StrCat("round plan: round ", at, " is before this plan's first round ", first_round));
  }
  if (auto st = CheckWorkers(job, workers, rank); !st.ok()) return st;
  const DataPosition here = At(at);
  RoundPlan p = *this;
  p.first_round = at;
  p.workers = workers;
  p.rank = rank;
  p.data_epoch = here.epoch;
  p.offset = here.position;
  p.epoch0 = EpochOf(at);
  if (job.train.rounds == 0) {
    const double left = std::max(0.0, job.train.epochs - p.epoch0);
    p.last_round = at + static_cast<std::uint64_t>(std::ceil(left * static_cast<double>(p.steps_per_epoch()) - 1e-9));
  }
  return p;
}

std::uint64_t RoundPlan::steps_per_epoch() const {
  return std::max<std::uint64_t>(1, samples / (std::uint64_t{workers} * batch * local_steps));
}

DataPosition RoundPlan::At(std::uint64_t round) const {
  const std::uint64_t k = round - first_round;
  const std::uint64_t global = std::uint64_t{workers} * batch * local_steps;
  const std::uint64_t first = (samples - std::min(samples, offset)) / global;
  if (k < first) return {data_epoch, offset + k * global};
  const std::uint64_t rest = k - first, s = steps_per_epoch();
  return {data_epoch + 1 + rest / s, (rest % s) * global};
}

double RoundPlan::EpochOf(std::uint64_t round) const {
  return epoch0 + static_cast<double>(round - first_round) / static_cast<double>(steps_per_epoch());
}

double RoundPlan::EpochOf(std::uint64_t round, std::uint64_t step) const {
  const double steps = static_cast<double>(steps_per_epoch()) * static_cast<double>(local_steps);
  return EpochOf(round) + static_cast<double>(step) / steps;
}

}  // namespace sketchps::session
