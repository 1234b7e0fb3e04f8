// The simulator's records (sim/): one JSON line per round and a summary of the run.
//
// Round record keys (JSON lines, --out DIR/records.jsonl):
//   round, epoch, participants (workers that took part), loss (mean batch loss over them; null when
//   none was finite), nonfinite (participants whose gradient was not finite: they skipped),
//   bytes_up (mean wire bytes a participant pushed, all shards), bytes_up_max, selected (mean entries
//   a participant sent), shard_in / shard_out (the busiest shard's ingress / egress: the participants'
//   pushes / the phase results to them plus G_t to the workers that sat out), busiest_link (the
//   larger of the two: the bytes the most loaded server link carries this round, every replica kept
//   in step as this system keeps them), shard_out_participants and busiest_link_participants (the
//   same without G_t to the workers that sat out: what a system whose idle workers fetch nothing
//   would carry, their catching up on return not counted), dense_bytes (4 d,
//   what a dense push is), checksum (hex, the weights every replica holds after the round),
//   compute_s (the participants' forward and backward), exchange_s (the round over the hub);
//   in compressed rounds input_norm, residual_norm, sent_share (means over the participants of each
//   worker's own figures) and, with scheme.diagnostics, recovered_share, best_share, hit_rate,
//   candidate_hit_rate (G_t against the exact sum: the same on every worker; docs/methods.md
//   "Recovery diagnostics"); after an evaluation test_accuracy, test_loss, test_samples and, after the
//   last round, final: true.
// Summary (--out DIR/summary.json): the run's configuration (`config`), final_test_accuracy, the
// evaluations, means per round of bytes_up, shard_in, shard_out and busiest_link, uplink_compression
// (dense_bytes / mean bytes_up), nonfinite_rounds, the recovery figures' means over the second half
// of the compressed rounds, and the wall time.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/cohort.h"

namespace sketchps::sim {

struct Evaluation {
  double accuracy = 0;
  double loss = 0;
  std::uint64_t samples = 0;
  bool final = false;
};

struct RoundFacts {
  std::uint64_t round = 0;
  double epoch = 0;
  std::vector<float> losses;  // per participant
  std::uint64_t dense_bytes = 0;
  double compute_s = 0;
  double exchange_s = 0;
};

// The round's record (keys above) from the cohort's figures.
nlohmann::json RoundRecord(const RoundFacts& facts, const CohortRound& cohort);
// Adds an evaluation's keys to a record.
void AddEvaluation(const Evaluation& e, nlohmann::json& record);

// Accumulates the records of a run into its summary.
class SummaryBuilder {
 public:
  explicit SummaryBuilder(nlohmann::json config) : config_(std::move(config)) {}
  void Add(const nlohmann::json& record);
  nlohmann::json Finish(double wall_s) const;

 private:
  nlohmann::json config_;
  std::vector<nlohmann::json> records_;
};

}  // namespace sketchps::sim
