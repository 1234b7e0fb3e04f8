#include "session/shard_readiness.h"

namespace sketchps::session {

absl::StatusOr<std::unique_ptr<ShardReadiness>> ShardReadiness::Create(const LayerTable& layers,
                                                                       const ShardMap& shards) {
  if (layers.layers.empty()) return absl::InvalidArgumentError("ShardReadiness: no parameters");
  if (shards.ranges.empty()) return absl::InvalidArgumentError("ShardReadiness: no shards");
  std::unique_ptr<ShardReadiness> r(new ShardReadiness());
  const auto n = static_cast<std::uint32_t>(shards.ranges.size());
  r->params_of_shard_.assign(n, 0);
  r->remaining_ = std::make_unique<std::atomic<std::uint32_t>[]>(n);
  r->signalled_ = std::make_unique<std::atomic<bool>[]>(n);
  r->seen_ = std::make_unique<std::atomic<bool>[]>(layers.layers.size());
  for (const auto& layer : layers.layers) {
    std::vector<std::uint32_t> covered;
    for (std::uint32_t s = 0; s < n; ++s) {
      const auto& range = shards.ranges[s];
      if (layer.offset < range.hi && layer.offset + layer.numel > range.lo) covered.push_back(s);
    }
    for (auto s : covered) ++r->params_of_shard_[s];
    r->shards_of_param_.push_back(std::move(covered));
  }
  return r;
}

void ShardReadiness::Arm(std::function<void(std::uint32_t)> ready) {
  ready_ = std::move(ready);
  for (std::size_t s = 0; s < params_of_shard_.size(); ++s) {
    remaining_[s].store(params_of_shard_[s]);
    signalled_[s].store(false);
  }
  for (std::size_t p = 0; p < shards_of_param_.size(); ++p) seen_[p].store(false);
  repeated_.store(false);
}

void ShardReadiness::MarkComplete(std::size_t param) {
  if (!ready_ || param >= shards_of_param_.size()) return;  // not armed, e.g. a backward outside the loop
  if (seen_[param].exchange(true)) {
    repeated_.store(true);
    return;
  }
  for (std::uint32_t s : shards_of_param_[param]) {
    if (remaining_[s].fetch_sub(1) == 1) Signal(s);
  }
}

void ShardReadiness::Signal(std::uint32_t shard) {
  if (!signalled_[shard].exchange(true)) ready_(shard);
}

void ShardReadiness::Finish() {
  if (ready_) {
    for (std::uint32_t s = 0; s < params_of_shard_.size(); ++s) Signal(s);
  }
  ready_ = nullptr;
}

}  // namespace sketchps::session
