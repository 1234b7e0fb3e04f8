#include "tools/summary.h"

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sketchps::tools {
namespace {

constexpr const char* kSummed[] = {"wire_up", "wire_down", "bytes_up", "bytes_down", "compute_s", "compress_s",
                                   "communicate_s"};

struct Totals {
  double wire_up = 0, wire_down = 0, bytes_up = 0, bytes_down = 0, compute = 0, compress = 0, communicate = 0;
  std::uint64_t rounds = 0;
};

absl::StatusOr<Totals> Sum(const std::vector<nlohmann::json>& records, std::uint32_t rank) {
  Totals t;
  for (std::size_t i = 0; i < records.size(); ++i) {
    for (const char* key : kSummed) {
      if (!records[i].contains(key) || !records[i][key].is_number()) {
        return absl::InvalidArgumentError(absl::StrCat("worker ", rank, " record ", i, ": missing numeric '", key, "'"));
      }
    }
    const auto& r = records[i];
    t.wire_up += r["wire_up"].get<double>();
    t.wire_down += r["wire_down"].get<double>();
    t.bytes_up += r["bytes_up"].get<double>();
    t.bytes_down += r["bytes_down"].get<double>();
    t.compute += r["compute_s"].get<double>();
    t.compress += r["compress_s"].get<double>();
    t.communicate += r["communicate_s"].get<double>();
  }
  t.rounds = records.size();
  return t;
}

}  // namespace

std::uint32_t ReportingRank(const std::vector<std::vector<nlohmann::json>>& metrics) {
  std::uint32_t best = 0;
  double best_round = -1;
  for (std::uint32_t rank = 0; rank < metrics.size(); ++rank) {
    if (metrics[rank].empty()) continue;
    const double round = metrics[rank].back().value("round", -1.0);
    if (round > best_round) {
      best = rank;
      best_round = round;
    }
  }
  return best;
}

absl::StatusOr<std::vector<nlohmann::json>> ReadJsonLines(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::vector<nlohmann::json> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": not a JSON object"));
    out.push_back(std::move(j));
  }
  return out;
}

absl::StatusOr<nlohmann::json> Summarize(const RunFacts& facts, const std::vector<std::vector<nlohmann::json>>& metrics) {
  if (metrics.empty()) return absl::InvalidArgumentError("no worker metrics");
  Totals all;
  double dense_bytes = 0;
  for (std::uint32_t rank = 0; rank < metrics.size(); ++rank) {
    if (metrics[rank].empty()) return absl::InvalidArgumentError(absl::StrCat("worker ", rank, " recorded no rounds"));
    SKETCHPS_ASSIGN_OR_RETURN(Totals t, Sum(metrics[rank], rank));
    all.wire_up += t.wire_up;
    all.wire_down += t.wire_down;
    all.bytes_up += t.bytes_up;
    all.bytes_down += t.bytes_down;
    all.compute += t.compute;
    all.compress += t.compress;
    all.communicate += t.communicate;
    all.rounds = std::max(all.rounds, t.rounds);
    dense_bytes = metrics[rank].back().value("dense_bytes", 0.0);
  }
  double worker_rounds = 0;
  for (const auto& m : metrics) worker_rounds += static_cast<double>(m.size());
  const double workers = static_cast<double>(metrics.size());
  const std::uint32_t reporter = ReportingRank(metrics);
  nlohmann::json accuracy = nullptr;
  for (const auto& r : metrics[reporter]) {
    if (r.contains("test_accuracy")) accuracy = r["test_accuracy"];
  }
  auto per = [&](double total) { return total / worker_rounds; };
  auto ratio = [&](double bytes) { return bytes > 0 ? dense_bytes / bytes : 0.0; };
  return nlohmann::json{
      {"scheme", facts.scheme},
      {"model", facts.model},
      {"workers", facts.workers},
      {"servers", facts.servers},
      {"density", facts.density},
      {"rounds", all.rounds},
      {"epochs", static_cast<double>(all.rounds) / facts.rounds_per_epoch},
      {"final_test_accuracy", accuracy},
      {"wall_seconds", facts.wall_seconds},
      {"rounds_per_second", facts.train_seconds > 0 ? static_cast<double>(all.rounds) / facts.train_seconds : 0.0},
      {"bytes_up_per_worker_per_round", per(all.wire_up)},
      {"bytes_down_per_worker_per_round", per(all.wire_down)},
      {"raw_bytes_up_per_worker_per_round", per(all.bytes_up)},
      {"raw_bytes_down_per_worker_per_round", per(all.bytes_down)},
      {"dense_bytes_per_round", dense_bytes},
      {"compression_ratio_up", ratio(per(all.wire_up))},
      {"compression_ratio_down", ratio(per(all.wire_down))},
      {"compute_seconds", all.compute / workers},
      {"compress_seconds", all.compress / workers},
      {"communicate_seconds", all.communicate / workers},
      {"final_weights_checksum", metrics[reporter].back().value("checksum", "")},
      {"reporting_rank", reporter},
  };
}

}  // namespace sketchps::tools
