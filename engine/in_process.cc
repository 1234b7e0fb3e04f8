#include "engine/in_process.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sketchps {
namespace {

class InProcessAggregator final : public Aggregator {
 public:
  InProcessAggregator(InProcessHub& hub, std::uint32_t worker, absl::Duration timeout)
      : hub_(hub), worker_(worker), timeout_(timeout) {}

  absl::StatusOr<std::shared_ptr<const PhaseResult>> RunPhase(std::uint32_t shard, std::uint64_t round,
                                                              std::uint32_t phase, Contribution contribution) override {
    if (shard >= hub_.num_shards()) {
      return absl::InvalidArgumentError(absl::StrCat("shard ", shard, " >= ", hub_.num_shards()));
    }
    const PhaseKey key{round, phase};
    SKETCHPS_RETURN_IF_ERROR(hub_.table(shard).Submit(key, worker_, std::move(contribution)));
    return hub_.table(shard).Await(key, absl::Now() + timeout_);
  }
  std::uint32_t worker_id() const override { return worker_; }
  std::uint32_t num_workers() const override { return hub_.num_workers(); }

 private:
  InProcessHub& hub_;
  const std::uint32_t worker_;
  const absl::Duration timeout_;
};

}  // namespace

InProcessHub::InProcessHub(std::uint32_t num_workers, const ShardMap& shards, const std::vector<float>& initial_weights,
                           const OptimizerConfig& optimizer, bool global_momentum, double rounds_per_epoch,
                           const LayerTable& layers)
    : num_workers_(num_workers) {
  for (const auto& range : shards.ranges) {
    ShardOptions o;
    o.num_workers = num_workers;
    o.initial_weights.assign(initial_weights.begin() + range.lo, initial_weights.begin() + range.hi);
    o.optimizer = optimizer;
    o.global_momentum = global_momentum;
    o.layers = ClipLayers(layers, range.lo, range.hi);
    o.rounds_per_epoch = rounds_per_epoch;
    shards_.push_back(std::make_unique<Shard>(std::move(o)));
  }
}

std::vector<float> InProcessHub::MasterWeights() const {
  std::vector<float> all;
  for (const auto& s : shards_) {
    auto w = s->Weights();
    all.insert(all.end(), w.begin(), w.end());
  }
  return all;
}

std::unique_ptr<Aggregator> InProcessHub::MakeAggregator(std::uint32_t worker_id, absl::Duration timeout) {
  return std::make_unique<InProcessAggregator>(*this, worker_id, timeout);
}

}  // namespace sketchps
