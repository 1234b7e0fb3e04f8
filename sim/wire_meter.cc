#include "sim/wire_meter.h"

#include "common/status.h"
#include "engine/phase_proto.h"

namespace sketchps::sim {

absl::StatusOr<std::uint64_t> ResultSizes::Of(const PhaseResult& result) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = sizes_.find(&result); it != sizes_.end()) return it->second;
  }
  SKETCHPS_ASSIGN_OR_RETURN(const std::uint64_t bytes, PayloadWireBytes(result.value, ValueEncoding::kF32));
  absl::MutexLock lock(&mu_);
  sizes_[&result] = bytes;
  return bytes;
}

void ResultSizes::Clear() {
  absl::MutexLock lock(&mu_);
  sizes_.clear();
}

void WorkerBytes::Reset(std::uint32_t shards) {
  up.assign(shards, 0);
  down.assign(shards, 0);
  final.assign(shards, 0);
}

absl::StatusOr<std::uint64_t> PayloadWireBytes(const PayloadValue& payload, ValueEncoding values) {
  v1::Payload msg;
  SKETCHPS_RETURN_IF_ERROR(EncodeBody(payload, &msg, values));
  return msg.ByteSizeLong();
}

absl::StatusOr<std::shared_ptr<const PhaseResult>> MeteredAggregator::RunPhase(std::uint32_t shard, std::uint64_t round,
                                                                               std::uint32_t phase,
                                                                               Contribution contribution) {
  std::uint64_t up = 0;
  if (contribution.payload) {
    SKETCHPS_ASSIGN_OR_RETURN(up, PayloadWireBytes(*contribution.payload, contribution.values));
  }
  const bool final_phase = contribution.spec.final_phase;
  SKETCHPS_ASSIGN_OR_RETURN(auto result, inner_.RunPhase(shard, round, phase, std::move(contribution)));
  SKETCHPS_ASSIGN_OR_RETURN(const std::uint64_t down, sizes_.Of(*result));
  bytes_.up.at(shard) += up;
  bytes_.down.at(shard) += down;
  if (final_phase) bytes_.final.at(shard) += down;
  return result;
}

}  // namespace sketchps::sim
