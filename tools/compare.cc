#include "tools/compare.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "job/job_spec.h"
#include "tools/summary.h"

namespace sketchps::tools {
namespace fs = std::filesystem;
namespace {

nlohmann::json ReadJson(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  auto j = nlohmann::json::parse(in, nullptr, false);
  return j.is_discarded() ? nlohmann::json(nullptr) : j;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Every rank's records (a rank without a file has none).
std::vector<std::vector<nlohmann::json>> AllRecords(const fs::path& dir, std::uint32_t workers) {
  std::vector<std::vector<nlohmann::json>> out(workers);
  for (std::uint32_t r = 0; r < workers; ++r) {
    if (auto records = ReadJsonLines((dir / absl::StrCat("worker-", r, ".jsonl")).string()); records.ok())
      out[r] = *records;
  }
  return out;
}

// Rank 0's records: throughput before the kill and the longest gap after it; every rank's for the
// bytes (the definition of summary.json, tools/summary.h Traffic).
nlohmann::json Measure(const fs::path& dir, const std::string& mode, int code, std::uint64_t total_rounds,
                       std::uint32_t workers) {
  auto records = ReadJsonLines((dir / "worker-0.jsonl").string());
  const auto faults = ReadJson(dir / "faults.json");
  nlohmann::json row{{"mode", mode}, {"exit_code", code}};
  if (!records.ok() || records->size() < 2 || !faults.is_object() || !faults.contains("kills")) {
    row["error"] = "no metrics or no kill recorded";
    return row;
  }
  const double kill_at = faults["kills"][0]["at"].get<double>();
  std::vector<double> gaps_before;
  double gap_across = 0, first_t = (*records)[0]["time"], last_before = first_t;
  std::uint64_t before = 0, redone = 0;
  for (std::size_t i = 0; i < records->size(); ++i) {
    const auto& r = (*records)[i];
    if (r.contains("regroup")) redone += r["regroup"].value("rounds_redone", 0ull);
    const double t = r["time"];
    if (i > 0) {
      const double gap = t - (*records)[i - 1]["time"].get<double>();
      if (t <= kill_at) {
        gaps_before.push_back(gap);
      } else if ((*records)[i - 1]["time"].get<double>() <= kill_at) {
        gap_across = gap;  // the round that the kill interrupted
      }
    }
    if (t <= kill_at) {
      ++before;
      last_before = t;
    }
  }
  const double round_time = Median(gaps_before);
  row["kill"] = faults["kills"][0]["process"];
  row["killed_after_round"] = faults["kills"][0]["rank0_rounds"];
  row["rounds_per_second_before_kill"] =
      last_before > first_t ? static_cast<double>(before - 1) / (last_before - first_t) : 0.0;
  const auto traffic = TrafficPerWorkerPerRound(AllRecords(dir, workers));
  if (!traffic.ok()) {
    row["error"] = std::string(traffic.status().message());
    return row;
  }
  row["bytes_up_per_worker_per_round"] = traffic->wire_up;
  row["bytes_down_per_worker_per_round"] = traffic->wire_down;
  row["rounds_completed"] = records->size();
  if (faults.contains("first_failure")) {
    row["rounds_lost"] = total_rounds - std::min<std::uint64_t>(total_rounds, records->size());
    row["seconds_to_detect"] = faults["first_failure"]["at"].get<double>() - kill_at;
    row["failure"] = faults["first_failure"]["log_tail"];
  } else {
    // Rounds whose work was thrown away: PS shards resume from their checkpoint (none); peers roll
    // back the rounds the others had not completed.
    row["rounds_lost"] = redone;
    row["seconds_to_recover"] = std::max(0.0, gap_across - round_time);
    row["workers_at_end"] = records->back().value("workers", 0);
  }
  const auto summary = ReadJson(dir / "summary.json");
  row["final_test_accuracy"] = summary.is_object() ? summary["final_test_accuracy"] : nullptr;
  return row;
}

std::string Markdown(const std::vector<nlohmann::json>& rows) {
  std::string out =
      "| mode | killed | rounds/s before | bytes up / worker / round | bytes down / worker / round | recovery | rounds "
      "lost | "
      "final test accuracy |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : rows) {
    if (r.contains("error")) {
      out += absl::StrFormat("| %s | - | - | - | - | %s | - | - |\n", r["mode"].get<std::string>(),
                             r["error"].get<std::string>());
      continue;
    }
    std::string recovery;
    if (r.contains("seconds_to_detect")) {
      recovery = absl::StrFormat("stopped: dead peer detected in %.1f s", r["seconds_to_detect"].get<double>());
    } else if (r["mode"] == "decentralized") {
      recovery = absl::StrFormat("went on with %d workers after %.1f s", r["workers_at_end"].get<int>(),
                                 r["seconds_to_recover"].get<double>());
    } else {
      recovery = absl::StrFormat("resumed in %.1f s", r["seconds_to_recover"].get<double>());
    }
    out += absl::StrFormat(
        "| %s | %s after round %d | %.2f | %.0f | %.0f | %s | %d | %s |\n", r["mode"].get<std::string>(),
        r["kill"].get<std::string>(), r["killed_after_round"].get<std::uint64_t>(),
        r["rounds_per_second_before_kill"].get<double>(), r["bytes_up_per_worker_per_round"].get<double>(),
        r["bytes_down_per_worker_per_round"].get<double>(), recovery, r["rounds_lost"].get<std::uint64_t>(),
        r["final_test_accuracy"].is_number() ? absl::StrFormat("%.2f%%", 100 * r["final_test_accuracy"].get<double>())
                                             : std::string("-"));
  }
  return out;
}

}  // namespace

int CompareModes(const CompareOptions& options) {
  auto job = LoadJobSpec(options.job.job_path, options.job.overrides);
  if (!job.ok()) {
    std::fprintf(stderr, "sketchps compare: %s\n", std::string(job.status().message()).c_str());
    return 2;
  }
  if (options.kill_round == 0 || options.kill_round >= job->total_rounds()) {
    std::fprintf(stderr, "sketchps compare: --kill-round %llu must be in [1, %llu)\n",
                 static_cast<unsigned long long>(options.kill_round),
                 static_cast<unsigned long long>(job->total_rounds()));
    return 2;
  }
  std::error_code ec;
  if (fs::exists(options.out, ec) && !fs::is_directory(options.out, ec)) {
    std::fprintf(stderr, "sketchps compare: --out %s: not a directory\n", options.out.c_str());
    return 2;
  }
  std::vector<nlohmann::json> rows;
  bool as_described = true;
  for (const std::string mode : {"ps", "decentralized"}) {
    RunOptions run;
    run.job = options.job;
    run.job.overrides.push_back("mode=" + mode);
    run.out = (fs::path(options.out) / mode).string();
    run.bin_dir = options.bin_dir;
    run.progress = false;
    if (mode == "decentralized") run.peer_timeout_seconds = options.peer_timeout_seconds;
    run.kills = {mode == "ps" ? absl::StrCat("server:", job->servers - 1, "@", options.kill_round)
                              : absl::StrCat("worker:", job->workers - 1, "@", options.kill_round)};
    if (fs::exists(run.out, ec)) std::fprintf(stderr, "compare: replacing the previous run in %s\n", run.out.c_str());
    if (fs::remove_all(run.out, ec); ec) {
      std::fprintf(stderr, "sketchps compare: --out: cannot remove %s: %s\n", run.out.c_str(), ec.message().c_str());
      return 2;
    }
    std::fprintf(stderr, "compare: %s mode, killing %s\n", mode.c_str(), run.kills[0].c_str());
    const int code = RunJob(run);
    if (code == 130) {  // SIGINT or SIGTERM: RunJob stopped every process (Launch::Monitor)
      std::fprintf(stderr, "compare: interrupted during the %s run; nothing compared\n", mode.c_str());
      return code;
    }
    // A peer kill stops the decentralized run only when the job says so (peer.on_failure: stop).
    as_described &= mode == "ps" || job->peer.on_failure == OnPeerFailure::kRegroup ? code == 0 : code == 1;
    rows.push_back(Measure(run.out, mode, code, job->total_rounds(), job->workers));
  }
  const std::string table = Markdown(rows);
  std::ofstream(fs::path(options.out) / "compare.md") << table;
  std::ofstream(fs::path(options.out) / "compare.json") << nlohmann::json(rows).dump(2) << "\n";
  std::printf("%s", table.c_str());
  return as_described ? 0 : 1;
}

}  // namespace sketchps::tools
