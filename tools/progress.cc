#include "tools/progress.h"

#include <sys/ioctl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sketchps::tools {
namespace {

constexpr std::size_t kRateWindow = 32;  // records the rate is measured over
constexpr int kBarWidth = 10;

struct Segment {
  std::string text;
  int priority;  // 0 always shown; higher numbers are dropped first
};

// Keeps the segments that fit in `width` (joined by one space), most important first, in their order.
std::string Fit(const std::vector<Segment>& segments, std::size_t width) {
  std::vector<bool> keep(segments.size(), false);
  std::size_t used = 0;
  for (int priority = 0; priority <= 9; ++priority) {
    for (std::size_t i = 0; i < segments.size(); ++i) {
      if (segments[i].priority != priority || segments[i].text.empty()) continue;
      const std::size_t cost = segments[i].text.size() + (used > 0 ? 1 : 0);
      if (used + cost <= width || priority == 0) {
        keep[i] = true;
        used += cost;
      }
    }
  }
  std::string out;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    if (keep[i]) absl::StrAppend(&out, out.empty() ? "" : " ", segments[i].text);
  }
  return out.size() > width ? out.substr(0, width) : out;
}

std::string Megabytes(double bytes) { return absl::StrFormat("%.1fMB", bytes / 1e6); }

// A numeric field, or `fallback` when it is absent or not a number.
double NumberOr(const nlohmann::json& r, const char* key, double fallback) {
  const auto it = r.find(key);
  return it != r.end() && it->is_number() ? it->get<double>() : fallback;
}

}  // namespace

std::vector<nlohmann::json> JsonLinesFollower::ReadNew() {
  std::vector<nlohmann::json> out;
  std::ifstream in(path_, std::ios::binary | std::ios::ate);
  if (!in) return out;
  // A restarted worker drops the records it replays (session/session.h JsonLinesLog::Open): go on from
  // where the file now ends.
  offset_ = std::min<std::uint64_t>(offset_, static_cast<std::uint64_t>(in.tellg()));
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline yet: the writer is mid-line
    offset_ += line.size() + 1;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

void Progress::Add(const nlohmann::json& r) {
  ++records_;
  const double round = NumberOr(r, "round", 0.0);
  if (round >= 0) rounds_ = std::max<std::uint64_t>(rounds_, static_cast<std::uint64_t>(round) + 1);
  // A diverged worker writes its NaN loss as null.
  if (r.contains("loss")) loss_ = NumberOr(r, "loss", std::numeric_limits<double>::quiet_NaN());
  wire_up_ += NumberOr(r, "bytes_up", 0.0);
  wire_down_ += NumberOr(r, "bytes_down", 0.0);
  dense_ += NumberOr(r, "dense_bytes", 0.0);
  if (r.contains("test_accuracy") && r["test_accuracy"].is_number()) {
    accuracy_ = r["test_accuracy"].get<double>();
    accuracy_round_ = r.value("test_round", r.value("round", 0ull)) + 1;
  }
  if (r.contains("time") && r["time"].is_number()) {
    times_.push_back(r["time"].get<double>());
    if (times_.size() > kRateWindow) times_.pop_front();
  }
}

double Progress::RoundsPerSecond() const {
  if (times_.size() < 2) return 0;
  const double span = times_.back() - times_.front();
  return span > 0 ? static_cast<double>(times_.size() - 1) / span : 0;
}

std::optional<double> Progress::EtaSeconds() const {
  const double rate = RoundsPerSecond();
  if (rate <= 0) return std::nullopt;
  return static_cast<double>(plan_.total_rounds - std::min(rounds_, plan_.total_rounds)) / rate;
}

std::string Progress::Waiting() const {
  if (!status_.empty()) return status_;
  if (rounds_ >= plan_.total_rounds) return "";
  const std::uint64_t next = rounds_ + 1;  // the round in progress, counted from 1
  if (next == plan_.total_rounds) {
    return absl::StrCat("last round + final evaluation on ", plan_.test_samples, " test images");
  }
  if (plan_.eval_every_rounds > 0 && next % plan_.eval_every_rounds == 0) {
    const std::uint64_t images =
        plan_.eval_samples > 0 ? std::min(plan_.eval_samples, plan_.test_samples) : plan_.test_samples;
    return absl::StrCat("round ", next, " + evaluation on ", images, " test images");
  }
  return "";
}

std::string Progress::Line(std::size_t width) const {
  const double frac = plan_.total_rounds > 0
                          ? std::min(1.0, static_cast<double>(rounds_) / static_cast<double>(plan_.total_rounds))
                          : 0.0;
  const int filled = static_cast<int>(frac * kBarWidth);
  const std::string waiting = Waiting();
  std::vector<Segment> s{{absl::StrCat(rounds_, "/", plan_.total_rounds), 0},
                         {"[" + std::string(filled, '#') + std::string(kBarWidth - filled, '.') + "]", 6}};
  if (records_ > 0) {
    const double rate = RoundsPerSecond();
    const auto eta = EtaSeconds();
    s.push_back({rate > 0 ? absl::StrFormat("%.2f r/s", rate) : "", 1});
    s.push_back({eta ? "ETA " + FormatDuration(*eta) : "", 1});
  }
  if (!waiting.empty()) s.push_back({"waiting: " + waiting, 0});
  if (records_ > 0) {
    auto ratio = [&](double sent) { return sent > 0 ? dense_ / sent : 0.0; };
    s.push_back({loss_ ? absl::StrFormat("loss %.3f", *loss_) : std::string("loss -"), 2});
    s.push_back({accuracy_ ? absl::StrFormat("acc %.1f%%@r%d", 100 * *accuracy_, accuracy_round_) : "", 3});
    s.push_back({absl::StrCat("up ", Megabytes(wire_up_), " down ", Megabytes(wire_down_)), 4});
    s.push_back({absl::StrFormat("%.0fx/%.0fx", ratio(wire_up_), ratio(wire_down_)), 7});
  }
  return Fit(s, width);
}

std::string FormatDuration(double seconds) {
  const auto total = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  if (total < 60) return absl::StrCat(total, "s");
  if (total < 3600) return absl::StrFormat("%dm%02ds", total / 60, total % 60);
  return absl::StrFormat("%dh%02dm", total / 3600, (total % 3600) / 60);
}

std::size_t TerminalWidth(int fd) {
  winsize size{};
  if (ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  std::size_t columns = 0;
  if (const char* env = std::getenv("COLUMNS"); env != nullptr && absl::SimpleAtoi(env, &columns) && columns > 0)
    return columns;
  return 80;
}

}  // namespace sketchps::tools
