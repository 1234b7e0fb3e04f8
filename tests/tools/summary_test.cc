// The launcher's pieces without processes: --kill parsing, the run summary, following a growing
// metrics file, the progress line.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "tools/progress.h"
#include "tools/report.h"
#include "tools/run.h"
#include "tools/summary.h"

using namespace sketchps::tools;

namespace {

nlohmann::json Record(int round, double up, double down, double compute) {
  return {{"round", round},   {"loss", 1.0 / (round + 1)}, {"wire_up", up},       {"wire_down", down},
          {"bytes_up", up - 10}, {"bytes_down", down - 10}, {"dense_bytes", 4000.0}, {"compute_s", compute},
          {"compress_s", 0.5},  {"communicate_s", 0.25},     {"checksum", "00ff"}};
}

}  // namespace

TEST_CASE("Kill specs parse or name the problem", "[tools]") {
  auto spec = ParseKillSpec("server:1@20");
  REQUIRE(spec.ok());
  CHECK(spec->role == "server");
  CHECK(spec->index == 1);
  CHECK(spec->after_round == 20);
  auto worker = ParseKillSpec("worker:3@7");
  REQUIRE(worker.ok());
  CHECK(worker->role == "worker");
  CHECK(worker->index == 3);
  for (const char* bad : {"server:1", "peer:0@3", "server:x@3", "server:1@", "@3", "server:1@2@3"}) {
    INFO(bad);
    auto parsed = ParseKillSpec(bad);
    CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(parsed.status().message()), Catch::Contains("--kill"));
  }
}

TEST_CASE("Summarize averages bytes over workers and rounds and sums time per worker", "[tools]") {
  const RunFacts facts{"topk", "cnn", 2, 1, 0.01, 10.0, 12.0, 8.0};
  std::vector<std::vector<nlohmann::json>> metrics{{Record(0, 100, 400, 1.0), Record(1, 300, 400, 1.0)},
                                                   {Record(0, 200, 400, 3.0), Record(1, 200, 400, 3.0)}};
  metrics[0][1]["test_accuracy"] = 0.75;
  auto s = Summarize(facts, metrics);
  REQUIRE(s.ok());
  CHECK((*s)["bytes_up_per_worker_per_round"].get<double>() == Approx(200.0));
  CHECK((*s)["bytes_down_per_worker_per_round"].get<double>() == Approx(400.0));
  CHECK((*s)["raw_bytes_up_per_worker_per_round"].get<double>() == Approx(190.0));
  CHECK((*s)["compression_ratio_up"].get<double>() == Approx(20.0));
  CHECK((*s)["compression_ratio_down"].get<double>() == Approx(10.0));
  CHECK((*s)["compute_seconds"].get<double>() == Approx(4.0));  // (2 + 6) / 2 workers
  CHECK((*s)["communicate_seconds"].get<double>() == Approx(0.5));
  CHECK((*s)["rounds"] == 2);
  CHECK((*s)["epochs"].get<double>() == Approx(0.2));
  CHECK((*s)["rounds_per_second"].get<double>() == Approx(0.25));
  CHECK((*s)["final_test_accuracy"].get<double>() == Approx(0.75));
  CHECK((*s)["final_weights_checksum"] == "00ff");
  CHECK((*s)["reporting_rank"] == 0);
  for (const char* key : {"scheme", "workers", "servers", "wall_seconds", "compress_seconds"}) CHECK(s->contains(key));

  // Rank 0 killed after its first round: rank 1 finished and reports accuracy and checksum.
  auto killed = metrics;
  killed[0].pop_back();
  killed[1][1]["test_accuracy"] = 0.5;
  killed[1][1]["checksum"] = "0aaa";
  auto k = Summarize(facts, killed);
  REQUIRE(k.ok());
  CHECK((*k)["reporting_rank"] == 1);
  CHECK((*k)["final_test_accuracy"].get<double>() == Approx(0.5));
  CHECK((*k)["final_weights_checksum"] == "0aaa");
  CHECK(ReportingRank({{Record(3, 1, 1, 1)}, {Record(3, 1, 1, 1)}, {Record(2, 1, 1, 1)}}) == 0);

  metrics[1][0].erase("wire_up");
  auto missing = Summarize(facts, metrics);
  CHECK(missing.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("worker 1 record 0") && Catch::Contains("wire_up"));
  CHECK(!Summarize(facts, {{}}).ok());
}

TEST_CASE("JsonLinesFollower returns complete lines once, and Progress renders them", "[tools]") {
  const auto path = std::filesystem::temp_directory_path() / ("sketchps-follow-" + std::to_string(::getpid()));
  std::ofstream out(path);
  JsonLinesFollower follower(path.string());
  CHECK(follower.ReadNew().empty());
  out << Record(0, 100, 200, 1).dump() << "\n" << "{\"round\": 1" << std::flush;  // the second line is incomplete
  auto first = follower.ReadNew();
  REQUIRE(first.size() == 1);
  CHECK(first[0]["round"] == 0);
  out << ", \"loss\": 0.5, \"test_accuracy\": 0.8}\n" << std::flush;
  auto second = follower.ReadNew();
  REQUIRE(second.size() == 1);
  CHECK(second[0]["round"] == 1);
  CHECK(follower.ReadNew().empty());

  Progress progress(4, 2.0);
  progress.Add(first[0]);
  progress.Add(second[0]);
  const std::string line = progress.Line(8);
  CHECK_THAT(line, Catch::Contains("[####....]") && Catch::Contains("2/4 rounds") && Catch::Contains("epoch 1.00") &&
                       Catch::Contains("acc 80.0%") && Catch::Contains("ratio 40x up"));
  std::filesystem::remove(path);
}

TEST_CASE("MarkdownReport writes one row per run and names a missing summary", "[tools]") {
  const auto dir = std::filesystem::temp_directory_path() / ("sketchps-report-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "a");
  std::ofstream(dir / "a" / "summary.json") << nlohmann::json{{"scheme", "topk"},
                                                              {"epochs", 1.0},
                                                              {"final_test_accuracy", 0.8512},
                                                              {"bytes_up_per_worker_per_round", 1000.0},
                                                              {"bytes_down_per_worker_per_round", 2000.0},
                                                              {"compression_ratio_up", 88.0},
                                                              {"compression_ratio_down", 44.0},
                                                              {"rounds_per_second", 2.5},
                                                              {"compute_seconds", 1.0},
                                                              {"compress_seconds", 1.0},
                                                              {"communicate_seconds", 2.0}}
                                                                 .dump();
  auto table = MarkdownReport({(dir / "a").string()});
  REQUIRE(table.ok());
  CHECK_THAT(*table, Catch::Contains("| topk | 1.00 | 85.12% | 1000 | 2000 | 88.0x | 44.0x | 2.50 | 25 / 25 / 50 |"));
  auto missing = MarkdownReport({(dir / "a").string(), (dir / "b").string()});
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("b/summary.json"));
  std::filesystem::remove_all(dir);
}
