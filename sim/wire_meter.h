// The simulator's byte accounting (sim/): what each simulated worker would put on the wire.
//
// A MeteredAggregator wraps one worker's in-process aggregator (engine/in_process.h) and counts, per
// shard and round, the bytes of the payload the worker pushes and of every phase result it
// receives, as the parameter-server protocol encodes them (engine/phase_proto.h EncodeBody: delta-varint
// indices, f16 sketch tables, values at scheme.values; the Payload message's size, without the
// request's ~45 bytes of header). So figures match `sketchps run`'s wire bytes up to headers.
// A phase result is encoded once however many workers receive it: ResultSizes caches its size by the
// result object, which every worker of a phase shares; clear it between rounds.
// Thread-safe across workers (each MeteredAggregator is used by one thread at a time, as any
// Aggregator).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine/aggregator.h"

namespace sketchps::sim {

// Encoded sizes of phase results, shared by the workers of a simulation.
class ResultSizes {
 public:
  absl::StatusOr<std::uint64_t> Of(const PhaseResult& result);
  void Clear();

 private:
  absl::Mutex mu_;
  std::map<const PhaseResult*, std::uint64_t> sizes_ ABSL_GUARDED_BY(mu_);
};

// One worker's bytes in the current round, per shard.
struct WorkerBytes {
  std::vector<std::uint64_t> up;     // its payloads
  std::vector<std::uint64_t> down;   // every phase result it received
  std::vector<std::uint64_t> final;  // the final phase's result (G_t's phase)
  void Reset(std::uint32_t shards);
};

// Wire bytes of a payload sent with `values` (engine/phase_proto.h EncodeBody).
absl::StatusOr<std::uint64_t> PayloadWireBytes(const PayloadValue& payload, ValueEncoding values);

class MeteredAggregator final : public Aggregator {
 public:
  // `inner`, `sizes` and `bytes` must outlive this object.
  MeteredAggregator(Aggregator& inner, ResultSizes& sizes, WorkerBytes& bytes)
      : inner_(inner), sizes_(sizes), bytes_(bytes) {}

  absl::StatusOr<std::shared_ptr<const PhaseResult>> RunPhase(std::uint32_t shard, std::uint64_t round,
                                                              std::uint32_t phase, Contribution contribution) override;
  std::uint32_t worker_id() const override { return inner_.worker_id(); }
  std::uint32_t num_workers() const override { return inner_.num_workers(); }

 private:
  Aggregator& inner_;
  ResultSizes& sizes_;
  WorkerBytes& bytes_;
};

}  // namespace sketchps::sim
