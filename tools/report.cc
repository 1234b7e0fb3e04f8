#include "tools/report.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sketchps::tools {
namespace {

double Num(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}

std::string Text(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string("-");
}

// "4 / 2", "4 / -" (decentralized), "4→3 / -" (a regroup left 3).
std::string Processes(const nlohmann::json& s) {
  if (!s.contains("workers") || !s["workers"].is_number()) return "-";
  const auto workers = s["workers"].get<std::uint64_t>();
  std::string out = absl::StrCat(workers);
  if (s.contains("workers_at_end") && s["workers_at_end"].is_number() &&
      s["workers_at_end"].get<std::uint64_t>() != workers) {
    absl::StrAppend(&out, "→", s["workers_at_end"].get<std::uint64_t>());
  }
  const bool servers = Text(s, "mode") != "decentralized" && s.contains("servers") && s["servers"].is_number() &&
                       s["servers"].get<std::uint64_t>() > 0;
  return absl::StrCat(out, " / ", servers ? absl::StrCat(s["servers"].get<std::uint64_t>()) : std::string("-"));
}

std::string Row(const nlohmann::json& s) {
  const double compute = Num(s, "compute_seconds"), compress = Num(s, "compress_seconds"),
               communicate = Num(s, "communicate_seconds");
  const double total = compute + compress + communicate;
  auto pct = [&](double part) { return total > 0 ? 100.0 * part / total : 0.0; };
  const std::string accuracy = s.contains("final_test_accuracy") && s["final_test_accuracy"].is_number()
                                   ? absl::StrFormat("%.2f%%", 100 * s["final_test_accuracy"].get<double>())
                                   : std::string("-");
  return absl::StrFormat("| %s | %s | %s | %.2f | %s | %.0f | %.0f | %.1fx | %.1fx | %.2f | %.0f / %.0f / %.0f |\n",
                         Text(s, "scheme"), Text(s, "mode"), Processes(s), Num(s, "epochs"), accuracy,
                         Num(s, "bytes_up_per_worker_per_round"), Num(s, "bytes_down_per_worker_per_round"),
                         Num(s, "compression_ratio_up"), Num(s, "compression_ratio_down"), Num(s, "rounds_per_second"),
                         pct(compute), pct(compress), pct(communicate));
}

}  // namespace

absl::StatusOr<nlohmann::json> LoadSummary(const std::string& dir) {
  const auto path = std::filesystem::path(dir) / "summary.json";
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot open"));
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not a JSON object"));
  return j;
}

absl::StatusOr<std::string> MarkdownReport(const std::vector<std::string>& run_dirs) {
  std::string out =
      "| scheme | mode | workers / servers | epochs | test accuracy | bytes up / worker / round | "
      "bytes down / worker / round | compression up | compression down | rounds/s | "
      "time % compute / compress / communicate |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& dir : run_dirs) {
    auto summary = LoadSummary(dir);
    if (!summary.ok()) return summary.status();
    out += Row(*summary);
  }
  return out;
}

}  // namespace sketchps::tools
