// Scheme: one compression method as worker-side state plus a short list of phases.
//
// PUBLIC SURFACE (docs/design-notes.md "Public surfaces"): a new method implements this interface
// and registers itself in schemes/registry.cc; nothing else in the system names methods.
//
// A worker holds one Scheme per shard range it trains. Each round:
//
//   scheme.BeginRound(info, d_grad);                 // the worker's gradient over the range
//   for (p = 0; p < scheme.NumPhases(); ++p)
//     result = aggregator.RunPhase(shard, round, p, scheme.Contribute(p, previous result));
//   aggregate = scheme.Finish(*result);              // G_t, identical on every worker
//
// NumPhases() depends only on the round and the configuration, never on data, so all workers run
// the same phases. Contribute(p) receives the result of phase p-1 (nullptr for p = 0). Finish
// turns the last result into the averaged aggregate and updates the worker's state (error
// feedback, momentum masking, stage counters). The replicated optimizer then applies the aggregate
// (engine/optimizer.h).
//
// Common behaviour, implemented once in SchemeBase:
//   - dense warm-up: rounds < warmup_rounds send the scheme's compression input densely;
//   - NaN/Inf guard: a non-finite gradient makes the worker skip the round: it contributes no
//     payload to any phase, leaves its state untouched and reports skipped() == true;
//   - sitting out (RoundInfo::sits_out, partial participation): the same as a skip, decided by the
//     caller instead of the gradient, which is not read;
//   - empty selections are valid payloads (zero entries);
//   - rounds left out by a deadline (FinishExcluded): state restored, the gradient carried over.
//
// A Scheme is used by one thread at a time. All device pointers belong to the kernel backend.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/job_clock.h"
#include "common/layout.h"
#include "engine/phase.h"

namespace sketchps {

// What a scheme instance knows about its place in the job. Constant for its lifetime.
struct SchemeContext {
  std::uint32_t worker_id = 0;
  std::uint32_t num_workers = 1;
  std::uint32_t shard_id = 0;
  std::uint64_t dim = 0;            // length of the range this instance compresses
  LayerTable layers;                // the layers of the range, offsets relative to its start
  std::uint64_t k = 0;              // entries to keep in this range (density x dim, split across shards)
  std::uint64_t seed = 0;           // job seed: sketch hashing and sampling
  std::uint64_t warmup_rounds = 0;  // dense rounds before compression starts (every scheme)
  JobClock clock;                   // the job's length, to resolve the scheme's schedules (common/job_clock.h)
  bool diagnostics = false;         // scheme.diagnostics: compare each round with the exact sum (below)
  ValueEncoding values = ValueEncoding::kF32;  // scheme.values: precision of the pushed values (scheme_base.h)
  // The job has a round deadline (ps.round_deadline_seconds): a round may close without this worker,
  // so each round keeps what FinishExcluded needs to undo it (a copy of the state, SaveState()).
  bool may_be_left_out = false;
};

struct RoundInfo {
  std::uint64_t round = 0;  // what the schemes' schedules follow (spans resolved with ctx.clock)
  double epoch = 0.0;       // fractional epochs completed before this round (the optimizer's LR schedule)
  // This worker sits the round out (partial participation: sim/, docs/reports/sim-map.md): it
  // contributes no payload to any phase, its state (residuals, momenta, carried gradients) stays as
  // it was, and G_t averages over the workers that contributed; it still completes every phase and
  // applies G_t, so its replica stays identical. BeginRound does not read d_grad. Observers of G_t
  // that every worker must follow alike (the recovery floor) still see it.
  bool sits_out = false;
};

// What a compressed round did on this worker's range (metrics.jsonl; docs/methods.md "Recovery
// diagnostics"). Squared L2 norms and counts, so that shards add up. Dense rounds and skipped
// rounds report compressed == false.
struct RoundDiagnostics {
  bool compressed = false;
  double input_sq = 0;        // ||a||^2, the compression input (e + g with error feedback)
  bool has_residual = false;  // the scheme keeps what it did not send (error feedback)
  double residual_sq = 0;     // ||e||^2 after the round
  // With ctx.diagnostics: the round first sums every worker's input densely (an extra phase, 4 x dim
  // bytes each way), then the scheme's phases run unchanged; G_t is compared with that exact sum s.
  bool exact = false;
  double exact_sq = 0;               // ||s||^2
  double returned_sq = 0;            // ||s at G_t's indices||^2: the mass the round returned
  double best_sq = 0;                // ||s at its own k largest entries||^2: what exact top-k returns
  std::uint64_t k = 0;               // ctx.k
  std::uint64_t hits = 0;            // of s's k largest, how many G_t holds
  bool has_candidates = false;       // the scheme's first phase proposes an index set (sketch
                                     // candidates, a leader's set)
  std::uint64_t candidate_hits = 0;  // of s's k largest, how many that set holds

  // The recovery floor's verdicts at this round (schemes/recovery_floor.h): on how many shards a window
  // ended in which the returned mass grew at the budget's most candidates ("not held"), and the largest
  // such growth. Set in every round whose G_t the scheme saw: compressed, skipped, left out or fetched
  // (compressed may be false); the worker's round record carries them (worker/trainer.h).
  std::uint32_t floor_not_held = 0;
  double floor_growth = 0;

  // Adds another shard's recovery-floor verdicts only (a round left out or fetched: its other figures
  // are not this round's).
  RoundDiagnostics& AddFloor(const RoundDiagnostics& o) {
    floor_not_held += o.floor_not_held;
    floor_growth = std::max(floor_growth, o.floor_growth);
    return *this;
  }

  // Adds another shard's figures (the whole vector's diagnostics are the sum over its shards).
  RoundDiagnostics& operator+=(const RoundDiagnostics& o) {
    compressed |= o.compressed;
    input_sq += o.input_sq;
    has_residual |= o.has_residual;
    residual_sq += o.residual_sq;
    exact |= o.exact;
    exact_sq += o.exact_sq;
    returned_sq += o.returned_sq;
    best_sq += o.best_sq;
    k += o.k;
    hits += o.hits;
    has_candidates |= o.has_candidates;
    candidate_hits += o.candidate_hits;
    return AddFloor(o);
  }
};

// Saved worker state: named device arrays (copied to host) and named scalars.
struct SchemeState {
  std::map<std::string, std::vector<float>> arrays;
  std::map<std::string, double> scalars;
};

class Scheme {
 public:
  virtual ~Scheme() = default;

  virtual const char* name() const = 0;
  // Why this instance's payloads cannot travel to a server or a peer (e.g. a sketch table larger than
  // the decoders accept for ctx.dim entries); OK otherwise. In-process runs may use such a scheme.
  virtual absl::Status wire_status() const { return absl::OkStatus(); }

  // Starts a round. d_grad holds ctx.dim floats and must stay valid and unchanged until Finish
  // returns (payloads are built from it during the phases).
  virtual absl::Status BeginRound(const RoundInfo& info, const float* d_grad) = 0;
  virtual std::uint32_t NumPhases() const = 0;
  // The phases round `round` has (NumPhases() of that round, known without BeginRound).
  virtual std::uint32_t PhasesIn(std::uint64_t round) const = 0;
  virtual absl::StatusOr<Contribution> Contribute(std::uint32_t phase, const PhaseResult* previous) = 0;
  virtual absl::StatusOr<Aggregate> Finish(const PhaseResult& last) = 0;

  // Ends a round that closed without this worker (a round deadline, PhaseResult::excluded), given the
  // round's final result: returns G_t as Finish would, puts the worker's state back as it was before
  // BeginRound and carries this round's gradient into the next round's (added to its d_grad), so the
  // late gradient is not lost. Needs ctx.may_be_left_out (FailedPrecondition otherwise).
  virtual absl::StatusOr<Aggregate> FinishExcluded(const PhaseResult& last) = 0;

  // A round this worker did not compute (it fell behind the shards and fetched the round's G_t,
  // engine/round.h FetchRound): the scheme sees G_t as every worker does (state that must follow
  // what all workers hold, e.g. the sketch methods' recovery floor) and nothing else changes.
  virtual absl::Status ObserveFetched(std::uint64_t round, const Aggregate& g) = 0;

  // Whether this worker skipped the current round: a non-finite gradient, or RoundInfo::sits_out.
  virtual bool skipped() const = 0;
  // Entries this worker selected in the current round (its uplink nnz); dim for dense rounds.
  virtual std::uint64_t selected() const = 0;
  // A warning about this configuration that does not stop the job (a setting measured to diverge),
  // naming the keys to change; empty when there is none. `sketchps run` prints it before starting.
  virtual std::string advisory() const { return ""; }
  // The current round's diagnostics, valid after Finish.
  virtual RoundDiagnostics diagnostics() const { return {}; }

  // Whether the replicated optimizer applies momentum to this scheme's aggregate (global momentum)
  // or the scheme keeps momentum locally (DGC-style momentum correction; optimizer momentum 0).
  virtual bool uses_global_momentum() const = 0;
  // Whether this scheme's phases keep state with the reduction (engine/reduce.h kSketchMomentumError:
  // FetchSGD's sketches), which lives on the shard (checkpointed with it) or on every peer, never on
  // the workers: a parameter-server shard can then resume only from its own checkpoint.
  virtual bool reduction_state() const { return false; }

  virtual SchemeState SaveState() const = 0;
  virtual absl::Status RestoreState(const SchemeState& state) = 0;
  // The gradient carried out of rounds this worker was left out of (FinishExcluded), which SaveState
  // leaves out (it is what a left-out round restores); empty when none is carried. A worker's state
  // file keeps it (session/scheme_state_file.h). Restoring a non-empty one of the wrong length is
  // InvalidArgument; restoring an empty one drops the carry.
  virtual std::vector<float> CarriedGradient() const { return {}; }
  virtual absl::Status RestoreCarriedGradient(const std::vector<float>& carried) {
    return carried.empty()
               ? absl::OkStatus()
               : absl::FailedPreconditionError("this scheme is never left out of a round: nothing to carry");
  }
};

// Builds one Scheme instance for a shard range (bound to a method and its configuration by
// schemes/registry.h, which sets ctx.warmup_rounds and ctx.clock).
using SchemeMaker = std::function<std::unique_ptr<Scheme>(SchemeContext)>;

}  // namespace sketchps
