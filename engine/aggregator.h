// Aggregator: how a worker runs one phase with everybody else. One interface, two topologies:
// the parameter-server client (ps/client.h) and the peer collectives (peer/peer_aggregator.h)
// implement it, and so does InProcessAggregator for tests and single-machine simulation. Schemes
// never know which.
//
// PUBLIC SURFACE (docs/design-notes.md "Public surfaces"): a new topology implements this interface;
// its contract (one result per phase, identical on every worker; the errors below) does not change
// without a new protocol version.
//
// An Aggregator object belongs to one worker and is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/phase.h"

namespace sketchps {

class Aggregator {
 public:
  virtual ~Aggregator() = default;

  // Contributes this worker's part of (round, phase) on `shard` and returns the phase result once
  // every worker has contributed. Errors: the transport's (Unavailable, DeadlineExceeded, ...) or the
  // reduction's (InvalidArgument when contributions disagree).
  virtual absl::StatusOr<std::shared_ptr<const PhaseResult>> RunPhase(std::uint32_t shard, std::uint64_t round,
                                                                      std::uint32_t phase,
                                                                      Contribution contribution) = 0;

  virtual std::uint32_t worker_id() const = 0;
  virtual std::uint32_t num_workers() const = 0;
};

// The auxiliary phase id: a dense sum over every worker outside the scheme's phases (evaluation
// counts; user metrics), run on shard 0.
inline constexpr std::uint32_t kAuxPhase = kMaxPhases - 1;

// The elementwise sum of every worker's `values`: phase kAuxPhase of `round`, the round every worker
// has just completed (so it orders after that round's phases and before the next round's, in the
// servers' tables and the peers' mailboxes alike). All workers call it with the same length and
// round. The values travel as float32.
// Errors: the aggregator's; InvalidArgument when the workers' lengths differ.
absl::StatusOr<std::vector<float>> SumOverWorkers(Aggregator& aggregator, std::uint64_t round,
                                                  std::vector<float> values);

}  // namespace sketchps
