#include "sim/batch_source.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sketchps::sim {

absl::StatusOr<std::unique_ptr<BatchSource>> BatchSource::Create(const JobSpec& job, const PartitionSpec& spec,
                                                                 std::span<const std::uint8_t> labels,
                                                                 std::uint64_t seed) {
  if (labels.size() < job.data.train_samples) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.train_samples: ", job.data.train_samples, " > the ", labels.size(), " labelled samples"));
  }
  std::unique_ptr<BatchSource> s(new BatchSource(job, seed));
  if (spec.kind == PartitionKind::kIid) {
    for (std::uint32_t w = 0; w < job.workers; ++w) {
      SKETCHPS_ASSIGN_OR_RETURN(auto plan, session::RoundPlan::Initial(job, w));
      s->plans_.push_back(plan);
    }
    return s;
  }
  s->iid_ = false;
  SKETCHPS_ASSIGN_OR_RETURN(s->partition_,
                            MakePartition(labels.first(job.data.train_samples), job.workers, spec, seed));
  s->local_.resize(job.workers);
  return s;
}

std::uint64_t BatchSource::LocalSample(std::uint32_t w, std::uint64_t position) {
  const auto& held = partition_.samples[w];
  Local& l = local_[w];
  const std::uint64_t epoch = position / held.size();
  if (epoch != l.epoch) {
    l.order = worker::EpochPermutation(held.size(), seed_ + 0x100000001b3ULL * (w + 1), epoch);
    l.epoch = epoch;
  }
  return held[l.order[position % held.size()]];
}

absl::StatusOr<std::span<const std::uint64_t>> BatchSource::Next(std::uint32_t w, std::uint64_t round) {
  if (iid_) {
    if (w >= plans_.size()) return absl::InvalidArgumentError(absl::StrCat("worker ", w, " of ", plans_.size()));
    return order_.Of(plans_[w], round);
  }
  if (w >= local_.size()) return absl::InvalidArgumentError(absl::StrCat("worker ", w, " of ", local_.size()));
  out_.resize(batch_);
  for (std::uint64_t j = 0; j < batch_; ++j) out_[j] = LocalSample(w, local_[w].consumed + j);
  local_[w].consumed += batch_;
  return std::span<const std::uint64_t>(out_);
}

std::span<const std::uint64_t> BatchSource::Held(std::uint32_t w) const {
  if (iid_ || w >= partition_.samples.size()) return {};
  return partition_.samples[w];
}

}  // namespace sketchps::sim
