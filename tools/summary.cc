#include "tools/summary.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status.h"
#include "common/version.h"
#include "tools/recovery_watch.h"
#include "worker/skipped_rounds.h"

namespace sketchps::tools {
namespace {

constexpr const char* kSummed[] = {"bytes_up",  "bytes_down", "payload_up",   "payload_down",
                                   "compute_s", "compress_s", "communicate_s"};

// Every summed field of every record of `rank` is a number.
absl::Status CheckFields(const std::vector<nlohmann::json>& records, std::uint32_t rank) {
  for (std::size_t i = 0; i < records.size(); ++i) {
    for (const char* key : kSummed) {
      if (!records[i].contains(key) || !records[i][key].is_number()) {
        return absl::InvalidArgumentError(
            absl::StrCat("worker ", rank, " record ", i, ": missing numeric '", key, "'"));
      }
    }
  }
  return absl::OkStatus();
}

double Total(const std::vector<std::vector<nlohmann::json>>& metrics, const char* key) {
  double total = 0;
  for (const auto& records : metrics) {
    for (const auto& r : records) total += r[key].get<double>();
  }
  return total;
}

nlohmann::json FinalAccuracy(const std::vector<nlohmann::json>& records, int& evaluations) {
  nlohmann::json accuracy = nullptr;
  evaluations = 0;
  for (const auto& r : records) {
    if (!r.contains("test_accuracy")) continue;
    accuracy = r["test_accuracy"];
    ++evaluations;
  }
  return accuracy;
}

// Each rank's records of rounds >= from (every record when none has a round field that large).
std::vector<std::vector<nlohmann::json>> RecordsFrom(const std::vector<std::vector<nlohmann::json>>& metrics,
                                                     double from) {
  std::vector<std::vector<nlohmann::json>> out(metrics.size());
  for (std::size_t rank = 0; rank < metrics.size(); ++rank) {
    for (const auto& r : metrics[rank]) {
      if (r.value("round", -1.0) >= from) out[rank].push_back(r);
    }
  }
  return out;
}

// Per rank, how many of its records have `key` set (a true flag or a non-zero count): the rounds a
// round deadline closed without it ("left_out") and those it fetched uncomputed ("caught_up").
nlohmann::json RoundsWith(const std::vector<std::vector<nlohmann::json>>& metrics, const char* key) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& records : metrics) {
    std::uint64_t n = 0;
    for (const auto& r : records) {
      const auto it = r.find(key);
      if (it == r.end()) continue;
      if ((it->is_boolean() && it->get<bool>()) || (it->is_number() && it->get<double>() > 0)) ++n;
    }
    out.push_back(n);
  }
  return out;
}

}  // namespace

nlohmann::json MembershipOverTime(const std::vector<std::vector<nlohmann::json>>& metrics) {
  std::map<std::uint64_t, nlohmann::json> by_round;  // round -> its members (any rank's record)
  for (const auto& records : metrics) {
    for (const auto& r : records) {
      if (r.contains("members") && r.contains("round")) by_round.emplace(r["round"].get<std::uint64_t>(), r["members"]);
    }
  }
  nlohmann::json changes = nlohmann::json::array();
  for (const auto& [round, members] : by_round) {
    if (changes.empty() || changes.back()["members"] != members) {
      changes.push_back({{"round", round}, {"workers", members.size()}, {"members", members}});
    }
  }
  return changes;
}

std::string DescribeSkippedRounds(const std::vector<std::vector<nlohmann::json>>& metrics) {
  std::vector<std::string> ranks;
  for (std::uint32_t rank = 0; rank < metrics.size(); ++rank) {
    worker::SkippedRounds skipped;  // what the worker itself counted and logged, from its records
    for (const auto& r : metrics[rank]) skipped.Note(r.value("round", std::uint64_t{0}), r.value("skipped", false));
    const std::uint64_t n = skipped.count();
    if (n > 0) {
      ranks.push_back(absl::StrCat("worker ", rank, " sat out ", n, n == 1 ? " round" : " rounds", " (the first round ",
                                   *skipped.first(), ")"));
    }
  }
  if (ranks.empty()) return "";
  return absl::StrCat(absl::StrJoin(ranks, ", "),
                      " for a non-finite gradient (NaN or Inf): such a round applied the others' aggregate without "
                      "it. Likely causes: a diverging model (a smaller learning rate?) or bad input data");
}

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
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<nlohmann::json> out;
  std::size_t start = 0;
  for (int n = 1; start < text.size(); ++n) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line(text.data() + start, end - start);
    const bool cut = end == text.size();  // no newline after it: its writer stopped in the middle
    start = end + 1;
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (cut && (j.is_discarded() || !j.is_object())) break;
    if (j.is_discarded() || !j.is_object())
      return absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": not a JSON object"));
    out.push_back(std::move(j));
  }
  return out;
}

double WireBytes(const nlohmann::json& record) {
  auto get = [&](const char* key) {
    return record.contains(key) && record[key].is_number() ? record[key].get<double>() : 0.0;
  };
  return get("bytes_up") + get("bytes_down");
}

absl::StatusOr<Traffic> TrafficPerWorkerPerRound(const std::vector<std::vector<nlohmann::json>>& metrics) {
  Traffic t;
  for (std::uint32_t rank = 0; rank < metrics.size(); ++rank) {
    SKETCHPS_RETURN_IF_ERROR(CheckFields(metrics[rank], rank));
    t.worker_rounds += static_cast<double>(metrics[rank].size());
  }
  if (t.worker_rounds == 0) return absl::InvalidArgumentError("no worker recorded a round");
  t.wire_up = Total(metrics, "bytes_up") / t.worker_rounds;
  t.wire_down = Total(metrics, "bytes_down") / t.worker_rounds;
  t.raw_up = Total(metrics, "payload_up") / t.worker_rounds;
  t.raw_down = Total(metrics, "payload_down") / t.worker_rounds;
  return t;
}

std::string UtcNow() { return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()); }

std::string ThisMachine() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(cpuinfo, line)) {
    if (!absl::StartsWith(line, "model name")) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) model = std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    break;
  }
  cpu_set_t set;
  const int cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
  return cores > 0 ? absl::StrCat(model, " (", cores, cores == 1 ? " core)" : " cores)") : model;
}

absl::StatusOr<nlohmann::json> Summarize(const RunFacts& facts,
                                         const std::vector<std::vector<nlohmann::json>>& metrics) {
  if (metrics.empty()) return absl::InvalidArgumentError("no worker metrics");
  std::uint64_t rounds = 0;
  for (std::uint32_t rank = 0; rank < metrics.size(); ++rank) {
    if (metrics[rank].empty()) return absl::InvalidArgumentError(absl::StrCat("worker ", rank, " recorded no rounds"));
    rounds = std::max<std::uint64_t>(rounds, metrics[rank].size());
  }
  SKETCHPS_ASSIGN_OR_RETURN(const Traffic traffic, TrafficPerWorkerPerRound(metrics));
  // The second half of the rounds: past the warm-ups of the default schedules (at most 10% of the job).
  auto late = TrafficPerWorkerPerRound(RecordsFrom(metrics, std::floor(static_cast<double>(rounds) / 2)));
  const Traffic second_half = late.ok() ? *late : traffic;
  const std::uint32_t reporter = ReportingRank(metrics);
  const nlohmann::json& last = metrics[reporter].back();
  const double dense_bytes = last.value("dense_bytes", 0.0);
  const double workers = static_cast<double>(metrics.size());
  int evaluations = 0;
  const nlohmann::json accuracy = FinalAccuracy(metrics[reporter], evaluations);
  auto ratio = [&](double bytes) { return bytes > 0 ? dense_bytes / bytes : 0.0; };
  const bool external = facts.optimizer == "external";  // the script's torch optimizer: not the job's lr
  nlohmann::json s{
      {"job_id", facts.job_id},
      {"date", facts.date},
      {"machine", facts.machine},
      {"mode", facts.mode},
      {"version", Version()},
      {"scheme", facts.scheme},
      {"model", facts.model},
      {"workers", facts.workers},
      {"servers", facts.servers},
      {"density", facts.density},
      {"optimizer", facts.optimizer},
      {"learning_rate", external ? nlohmann::json("external") : nlohmann::json(facts.learning_rate)},
      {"momentum", external ? nlohmann::json("external") : nlohmann::json(facts.momentum)},
      {"batch_size", facts.batch_size},
      {"rounds", rounds},
      {"epochs", static_cast<double>(rounds) / facts.rounds_per_epoch},
      {"workers_at_end", last.value("workers", facts.workers)},
      {"final_test_accuracy", accuracy},
      {"evaluations", evaluations},
      {"wall_seconds", facts.wall_seconds},
      {"rounds_per_second", facts.train_seconds > 0 ? static_cast<double>(rounds) / facts.train_seconds : 0.0},
      {"bytes_up_per_worker_per_round", traffic.wire_up},
      {"bytes_down_per_worker_per_round", traffic.wire_down},
      {"raw_bytes_up_per_worker_per_round", traffic.raw_up},
      {"raw_bytes_down_per_worker_per_round", traffic.raw_down},
      {"dense_bytes_per_round", dense_bytes},
      {"compression_ratio_up", ratio(traffic.wire_up)},
      {"compression_ratio_down", ratio(traffic.wire_down)},
      {"compression_ratio_up_second_half", ratio(second_half.wire_up)},
      {"compression_ratio_down_second_half", ratio(second_half.wire_down)},
      {"compute_seconds", Total(metrics, "compute_s") / workers},
      {"compress_seconds", Total(metrics, "compress_s") / workers},
      {"communicate_seconds", Total(metrics, "communicate_s") / workers},
      {"final_weights_checksum", last.value("checksum", "")},
      {"reporting_rank", reporter},
      {"faults", facts.faults.is_object() ? facts.faults : nlohmann::json::object()},
      {"residual_growth", ResidualGrowthJson(FindResidualGrowth(metrics))},
      {"recovery_floor", FloorNotHeldJson(FindFloorNotHeld(metrics), facts.scheme)},
  };
  if (!facts.peer.is_null()) s["peer"] = facts.peer;
  if (facts.planned_rounds > 0) s["planned_rounds"] = facts.planned_rounds;
  s["rounds_skipped"] = RoundsWith(metrics, "skipped");
  s["rounds_left_out"] = RoundsWith(metrics, "left_out");
  s["rounds_caught_up"] = RoundsWith(metrics, "caught_up");
  if (nlohmann::json m = MembershipOverTime(metrics); !m.empty()) s["membership"] = std::move(m);
  return s;
}

}  // namespace sketchps::tools
