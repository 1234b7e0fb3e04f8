#include "sim/sim_record.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace sketchps::sim {
namespace {

double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

double Max(const std::vector<std::uint64_t>& v) {
  return v.empty() ? 0.0 : static_cast<double>(*std::max_element(v.begin(), v.end()));
}

double Mean(const std::vector<std::uint64_t>& v) {
  double s = 0;
  for (auto x : v) s += static_cast<double>(x);
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

// The recovery figures (docs/methods.md "Recovery diagnostics"): each participant's own norms
// averaged; the comparison with the exact sum is the same on every worker (the first one's).
void AddDiagnostics(const CohortRound& c, nlohmann::json& r) {
  double input = 0, residual = 0, sent = 0;
  std::uint32_t n = 0, with_residual = 0;
  const RoundDiagnostics* exact = nullptr;
  for (const auto& w : c.rounds) {
    const RoundDiagnostics& d = w.diagnostics;
    if (!d.compressed) continue;
    ++n;
    input += std::sqrt(d.input_sq);
    if (d.has_residual) {
      ++with_residual;
      residual += std::sqrt(d.residual_sq);
      sent += 1.0 - Ratio(d.residual_sq, d.input_sq);
    }
    if (d.exact && exact == nullptr) exact = &d;
  }
  if (n == 0) return;
  r["input_norm"] = input / n;
  if (with_residual > 0) {
    r["residual_norm"] = residual / with_residual;
    r["sent_share"] = sent / with_residual;
  }
  if (exact == nullptr) return;
  r["recovered_share"] = Ratio(exact->returned_sq, exact->exact_sq);
  r["best_share"] = Ratio(exact->best_sq, exact->exact_sq);
  r["hit_rate"] = Ratio(static_cast<double>(exact->hits), static_cast<double>(exact->k));
  if (exact->has_candidates) {
    r["candidate_hit_rate"] = Ratio(static_cast<double>(exact->candidate_hits), static_cast<double>(exact->k));
  }
}

// Mean of `key` over the records that have it, from the first index `from` on; null when none has.
nlohmann::json MeanOf(const std::vector<nlohmann::json>& records, const char* key, std::size_t from = 0) {
  double sum = 0;
  std::size_t n = 0;
  for (std::size_t i = from; i < records.size(); ++i) {
    const auto it = records[i].find(key);
    if (it == records[i].end() || !it->is_number()) continue;
    sum += it->get<double>();
    ++n;
  }
  return n == 0 ? nlohmann::json(nullptr) : nlohmann::json(sum / static_cast<double>(n));
}

}  // namespace

nlohmann::json RoundRecord(const RoundFacts& f, const CohortRound& c) {
  double loss = 0;
  std::uint32_t finite = 0, nonfinite = 0;
  for (float l : f.losses) {
    if (std::isfinite(l)) {
      loss += l;
      ++finite;
    } else {
      ++nonfinite;
    }
  }
  std::uint64_t selected = 0;
  for (const auto& w : c.rounds) selected += w.selected;
  nlohmann::json r{{"round", f.round},
                   {"epoch", f.epoch},
                   {"participants", c.rounds.size()},
                   {"loss", finite > 0 ? nlohmann::json(loss / finite) : nlohmann::json(nullptr)},
                   {"nonfinite", nonfinite},
                   {"bytes_up", Mean(c.bytes_up)},
                   {"bytes_up_max", Max(c.bytes_up)},
                   {"selected", Ratio(static_cast<double>(selected), static_cast<double>(c.rounds.size()))},
                   {"shard_in", Max(c.shard_in)},
                   {"shard_out", Max(c.shard_out)},
                   {"busiest_link", std::max(Max(c.shard_in), Max(c.shard_out))},
                   {"shard_out_participants", Max(c.shard_out_participants)},
                   {"busiest_link_participants", std::max(Max(c.shard_in), Max(c.shard_out_participants))},
                   {"dense_bytes", f.dense_bytes},
                   {"checksum", absl::StrFormat("%016x", c.checksum)},
                   {"compute_s", f.compute_s},
                   {"exchange_s", f.exchange_s}};
  AddDiagnostics(c, r);
  return r;
}

void AddEvaluation(const Evaluation& e, nlohmann::json& record) {
  record["test_accuracy"] = e.accuracy;
  record["test_loss"] = std::isfinite(e.loss) ? nlohmann::json(e.loss) : nlohmann::json(nullptr);
  record["test_samples"] = e.samples;
  if (e.final) record["final"] = true;
}

void SummaryBuilder::Add(const nlohmann::json& record) { records_.push_back(record); }

nlohmann::json SummaryBuilder::Finish(double wall_s) const {
  nlohmann::json s{{"config", config_}, {"rounds", records_.size()}, {"wall_s", wall_s}};
  nlohmann::json evals = nlohmann::json::array();
  std::uint64_t nonfinite_rounds = 0;
  std::vector<nlohmann::json> compressed;
  for (const auto& r : records_) {
    if (r.contains("test_accuracy")) evals.push_back({{"round", r["round"]}, {"test_accuracy", r["test_accuracy"]}});
    if (r.value("nonfinite", 0) > 0) ++nonfinite_rounds;
    if (r.contains("input_norm")) compressed.push_back(r);
  }
  s["evaluations"] = evals;
  s["final_test_accuracy"] = evals.empty() ? nlohmann::json(nullptr) : evals.back()["test_accuracy"];
  s["nonfinite_rounds"] = nonfinite_rounds;
  for (const char* key :
       {"bytes_up", "shard_in", "shard_out", "busiest_link", "busiest_link_participants", "selected", "loss"}) {
    s[std::string(key) + "_mean"] = MeanOf(records_, key);
  }
  const double dense = records_.empty() ? 0.0 : records_.front().value("dense_bytes", 0.0);
  const double up = s["bytes_up_mean"].is_number() ? s["bytes_up_mean"].get<double>() : 0.0;
  s["uplink_compression"] = Ratio(dense, up);
  s["seconds_per_round"] = Ratio(wall_s, static_cast<double>(records_.size()));
  nlohmann::json late;
  for (const char* key : {"input_norm", "residual_norm", "sent_share", "recovered_share", "best_share", "hit_rate",
                          "candidate_hit_rate"}) {
    late[key] = MeanOf(compressed, key, compressed.size() / 2);
  }
  s["recovery_second_half"] = late;
  return s;
}

}  // namespace sketchps::sim
