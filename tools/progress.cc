#include "tools/progress.h"

#include <algorithm>
#include <fstream>

#include "absl/strings/str_format.h"

namespace sketchps::tools {

std::vector<nlohmann::json> JsonLinesFollower::ReadNew() {
  std::vector<nlohmann::json> out;
  std::ifstream in(path_, std::ios::binary);
  if (!in) return out;
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
  rounds_ = std::max<std::uint64_t>(rounds_, r.value("round", 0ull) + 1);
  loss_ = r.value("loss", loss_);
  wire_up_ += r.value("wire_up", 0.0);
  wire_down_ += r.value("wire_down", 0.0);
  dense_ += r.value("dense_bytes", 0.0);
  if (r.contains("test_accuracy")) accuracy_ = r["test_accuracy"].get<double>();
}

std::string Progress::Line(int bar_width) const {
  const double frac = total_ > 0 ? std::min(1.0, static_cast<double>(rounds_) / static_cast<double>(total_)) : 0.0;
  const int filled = static_cast<int>(frac * bar_width);
  std::string bar = "[" + std::string(filled, '#') + std::string(bar_width - filled, '.') + "]";
  auto ratio = [&](double sent) { return sent > 0 ? dense_ / sent : 0.0; };
  return absl::StrFormat("%s %5d/%d rounds  epoch %.2f  loss %.3f  acc %s  up %.1f MB  down %.1f MB  ratio %.0fx up / %.0fx down",
                         bar, rounds_, total_, static_cast<double>(rounds_) / rpe_, loss_,
                         accuracy_ ? absl::StrFormat("%.1f%%", 100 * *accuracy_) : std::string("-"), wire_up_ / 1e6,
                         wire_down_ / 1e6, ratio(wire_up_), ratio(wire_down_));
}

}  // namespace sketchps::tools
