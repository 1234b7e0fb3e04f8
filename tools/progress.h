// Live progress of a run: follows rank 0's metrics file as it grows and renders one status line
// (round, epoch, loss, test accuracy, MB sent, compression ratio).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sketchps::tools {

// Reads the complete lines appended to a file since the last call (a partial last line waits).
class JsonLinesFollower {
 public:
  explicit JsonLinesFollower(std::string path) : path_(std::move(path)) {}
  std::vector<nlohmann::json> ReadNew();

 private:
  std::string path_;
  std::uint64_t offset_ = 0;
};

class Progress {
 public:
  Progress(std::uint64_t total_rounds, double rounds_per_epoch) : total_(total_rounds), rpe_(rounds_per_epoch) {}
  void Add(const nlohmann::json& record);
  std::uint64_t rounds_done() const { return rounds_; }
  // "[#####.....]  120/468 rounds  epoch 0.26  loss 0.512  acc 81.2%  up 1.2 MB  down 3.4 MB  ratio 45x up / 12x down"
  std::string Line(int bar_width = 24) const;

 private:
  std::uint64_t total_, rounds_ = 0;
  double rpe_;
  double loss_ = 0, wire_up_ = 0, wire_down_ = 0, dense_ = 0;
  std::optional<double> accuracy_;
};

}  // namespace sketchps::tools
