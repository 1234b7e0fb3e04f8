// Live progress of a run: follows the reporting rank's metrics file as it grows and renders one
// status line that fits a given width (the terminal's), e.g. at 80 columns:
//   120/468 [###.......] 2.10 r/s ETA 2m46s loss 0.512 acc 81.2%@r100 up 1.2MB down 3.4MB 45x/12x
// Segments that do not fit are dropped, least important first (ratio, bar, bytes, accuracy, loss;
// the count, rate and ETA and what the run waits for stay). Before the first round the line says
// what the run waits for instead of showing zeros ("0/468 waiting: 2 servers starting"); during a
// round that ends with an evaluation it names it ("waiting: round 400 + evaluation on 2000 test
// images"), since such a round takes longer. The accuracy carries the round it was measured at.
#pragma once

#include <cstdint>
#include <deque>
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

// What a run will do, from its job spec.
struct ProgressPlan {
  std::uint64_t total_rounds = 0;
  std::uint64_t eval_every_rounds = 0;  // train.eval_every_rounds (0: only the final evaluation)
  std::uint64_t eval_samples = 0;       // test images of an intermediate evaluation (0: all)
  std::uint64_t test_samples = 10000;   // test images of the final evaluation
};

class Progress {
 public:
  explicit Progress(ProgressPlan plan) : plan_(plan) {}
  void Add(const nlohmann::json& record);
  // What the launcher waits for ("2 servers starting"); "" while the workers train.
  void SetStatus(std::string status) { status_ = std::move(status); }

  std::uint64_t rounds_done() const { return rounds_; }
  // Rounds per second over the last records (their times); 0 before two records.
  double RoundsPerSecond() const;
  // Seconds until the last round at that rate; nullopt while the rate is unknown.
  std::optional<double> EtaSeconds() const;
  // The launcher's status, else the evaluation that ends the round in progress, else "".
  std::string Waiting() const;
  // The status line, at most `width` characters.
  std::string Line(std::size_t width) const;

 private:
  ProgressPlan plan_;
  std::uint64_t rounds_ = 0, records_ = 0;
  std::optional<double> loss_;  // none until a record carries a loss (a script may pass none)
  double wire_up_ = 0, wire_down_ = 0, dense_ = 0;
  std::optional<double> accuracy_;
  std::uint64_t accuracy_round_ = 0;
  std::deque<double> times_;  // the last records' end times (unix seconds)
  std::string status_;
};

// "45s", "3m05s", "1h02m".
std::string FormatDuration(double seconds);

// Columns of the terminal on `fd`, else $COLUMNS, else 80.
std::size_t TerminalWidth(int fd);

}  // namespace sketchps::tools
