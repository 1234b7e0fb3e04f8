// The launcher's pieces without processes: --kill parsing, the run summary and its traffic, following
// a growing metrics file, the progress line, the report table.
#include "tools/summary.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "job/job_spec.h"
#include "tools/faults.h"
#include "tools/local_cluster.h"
#include "tools/progress.h"
#include "tools/report.h"
#include "tools/run.h"

using namespace sketchps::tools;

namespace {

nlohmann::json Record(int round, double up, double down, double compute = 1.0) {
  return {{"round", round},        {"loss", 1.0 / (round + 1)}, {"bytes_up", up},        {"bytes_down", down},
          {"payload_up", up - 10}, {"payload_down", down - 10}, {"dense_bytes", 4000.0}, {"compute_s", compute},
          {"compress_s", 0.5},     {"communicate_s", 0.25},     {"checksum", "00ff"}};
}

// The facts of a run; the other fields keep their defaults.
RunFacts Facts(std::string scheme, std::uint32_t workers, std::uint32_t servers, double rounds_per_epoch, double wall,
               double train) {
  RunFacts f;
  f.scheme = std::move(scheme);
  f.model = "cnn";
  f.workers = workers;
  f.servers = servers;
  f.density = 0.01;
  f.rounds_per_epoch = rounds_per_epoch;
  f.wall_seconds = wall;
  f.train_seconds = train;
  return f;
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

TEST_CASE("A kill first due after the job's last round is recorded as not done, and nothing is killed", "[tools]") {
  auto job = sketchps::ParseJobSpec(sketchps::DefaultJobSpecYaml(), "test", {"train.rounds=8"});
  REQUIRE(job.ok());
  auto faults = Faults::Plan({"server:1@4", "worker:0@7"}, *job);
  REQUIRE(faults.ok());
  LocalCluster cluster(*job, ClusterOptions{});  // no process started: a kill would fail to find one
  faults->Inject(3, cluster);
  CHECK(faults->record().empty());  // not due yet
  faults->Inject(8, cluster);       // the launcher saw rank 0 past round 4 only at the job's end
  const auto& record = faults->record();
  REQUIRE(record.contains("kills_not_done"));
  CHECK(record["kills_not_done"].size() == 2);
  CHECK(record["kills_not_done"][0]["process"] == "server 1");
  CHECK(record["kills_not_done"][0]["after_round"] == 4);
  CHECK(record["kills_not_done"][0]["rank0_rounds"] == 8);
  CHECK(!record.contains("kills"));
}

TEST_CASE("Summarize averages bytes over workers and rounds and sums time per worker", "[tools]") {
  RunFacts facts = Facts("topk", 2, 1, 10.0, 12.0, 8.0);
  facts.job_id = "job-a";
  facts.learning_rate = 0.05;
  facts.momentum = 0.9;
  facts.batch_size = 32;
  facts.faults = nlohmann::json::object();
  facts.faults["kills"] = nlohmann::json::array({nlohmann::json{{"process", "server 1"}}});
  facts.date = "2026-11-25T10:11:12Z";
  facts.machine = "Some CPU (2 cores)";
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
  // Second half: round 1 only, (300 + 200) / 2 = 250 bytes up.
  CHECK((*s)["compression_ratio_up_second_half"].get<double>() == Approx(4000.0 / 250));
  CHECK((*s)["compression_ratio_down_second_half"].get<double>() == Approx(10.0));
  CHECK((*s)["compute_seconds"].get<double>() == Approx(4.0));  // (2 + 6) / 2 workers
  CHECK((*s)["communicate_seconds"].get<double>() == Approx(0.5));
  CHECK((*s)["rounds"] == 2);
  CHECK((*s)["epochs"].get<double>() == Approx(0.2));
  CHECK((*s)["rounds_per_second"].get<double>() == Approx(0.25));
  CHECK((*s)["date"] == "2026-11-25T10:11:12Z");
  CHECK((*s)["machine"] == "Some CPU (2 cores)");
  CHECK((*s)["final_test_accuracy"].get<double>() == Approx(0.75));
  CHECK((*s)["final_weights_checksum"] == "00ff");
  CHECK((*s)["reporting_rank"] == 0);
  for (const char* key : {"scheme", "workers", "servers", "wall_seconds", "compress_seconds"}) CHECK(s->contains(key));
  CHECK((*s)["job_id"] == "job-a");
  CHECK((*s)["mode"] == "ps");
  CHECK(!(*s)["version"].get<std::string>().empty());
  CHECK((*s)["learning_rate"].get<double>() == Approx(0.05));
  CHECK((*s)["momentum"].get<double>() == Approx(0.9));
  CHECK((*s)["batch_size"] == 32);
  CHECK(!s->contains("planned_rounds"));  // not given
  CHECK((*s)["faults"]["kills"][0]["process"] == "server 1");
  CHECK((*s)["evaluations"] == 1);
  CHECK((*s)["workers_at_end"] == 2);  // the records carry no "workers": the job's
  CHECK(!s->contains("peer"));

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

  metrics[1][0].erase("bytes_up");
  auto missing = Summarize(facts, metrics);
  CHECK(missing.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(missing.status().message()),
             Catch::Contains("worker 1 record 0") && Catch::Contains("bytes_up"));
  CHECK(!Summarize(facts, {{}}).ok());
}

TEST_CASE("The machine and the date a summary names are this machine's and now", "[tools]") {
  const std::string now = UtcNow();
  REQUIRE(now.size() == 20);  // 2026-11-25T10:11:12Z
  CHECK(now[4] == '-');
  CHECK(now[10] == 'T');
  CHECK(now.back() == 'Z');
  const std::string machine = ThisMachine();
  CHECK_THAT(machine, Catch::Contains(" core"));
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      CHECK_THAT(machine, Catch::StartsWith(line.substr(line.find(':') + 2)));
      break;
    }
  }
}

TEST_CASE("A decentralized summary says so and names its peer settings", "[tools]") {
  RunFacts facts = Facts("scalecom", 3, 0, 10.0, 1.0, 1.0);
  facts.mode = "decentralized";
  facts.peer = {{"timeout_seconds", 3.0}, {"on_failure", "regroup"}};
  auto last = Record(1, 10, 10);
  last["workers"] = 2;
  auto s = Summarize(facts, {{Record(0, 10, 10)}, {Record(0, 10, 10), last}, {Record(0, 10, 10), last}});
  REQUIRE(s.ok());
  CHECK((*s)["mode"] == "decentralized");
  CHECK((*s)["servers"] == 0);
  CHECK((*s)["peer"]["on_failure"] == "regroup");
  CHECK((*s)["reporting_rank"] == 1);
  CHECK((*s)["workers_at_end"] == 2);
  CHECK((*s)["faults"].is_object());
  CHECK((*s)["final_test_accuracy"].is_null());
}

TEST_CASE("Traffic is the mean over every worker's rounds, as summary.json reports it", "[tools]") {
  // Rank 0 ran 3 rounds, rank 1 was killed after 1: (100 + 200 + 300 + 1000) / 4 records.
  const std::vector<std::vector<nlohmann::json>> metrics{{Record(0, 100, 50), Record(1, 200, 50), Record(2, 300, 50)},
                                                         {Record(0, 1000, 50)}};
  auto t = TrafficPerWorkerPerRound(metrics);
  REQUIRE(t.ok());
  CHECK(t->wire_up == Approx(400.0));
  CHECK(t->wire_down == Approx(50.0));
  CHECK(t->raw_up == Approx(390.0));
  CHECK(t->worker_rounds == 4);
  CHECK(WireBytes(Record(0, 100, 50)) == Approx(150.0));
  CHECK(WireBytes(nlohmann::json{{"round", 0}}) == 0);
  CHECK(TrafficPerWorkerPerRound({{}, {}}).status().code() == absl::StatusCode::kInvalidArgument);
  const RunFacts facts = Facts("topk", 2, 1, 10.0, 12.0, 8.0);
  auto s = Summarize(facts, metrics);
  REQUIRE(s.ok());
  CHECK((*s)["bytes_up_per_worker_per_round"].get<double>() == Approx(t->wire_up));
}

TEST_CASE("Summarize says the script's optimizer owns lr and momentum, and gives the planned rounds", "[tools]") {
  RunFacts facts = Facts("dense", 1, 1, 10.0, 12.0, 8.0);
  facts.optimizer = "external";  // a comm hook or apply="torch" run: the job's optimizer.lr was never used
  facts.learning_rate = 0.05;
  facts.momentum = 0.9;
  facts.planned_rounds = 4;
  auto s = Summarize(facts, {{Record(0, 100, 400), Record(1, 100, 400)}});
  REQUIRE(s.ok());
  CHECK((*s)["optimizer"] == "external");
  CHECK((*s)["learning_rate"] == "external");
  CHECK((*s)["momentum"] == "external");
  CHECK((*s)["planned_rounds"] == 4);
  CHECK((*s)["rounds"] == 2);
}

TEST_CASE("The progress line shows no loss when the records carry none", "[tools]") {
  Progress progress(ProgressPlan{4, 0, 0, 10000});
  auto r = Record(0, 100, 200);
  r.erase("loss");  // a script that passes no loss to step() / record_loss()
  progress.Add(r);
  CHECK_THAT(progress.Line(200), Catch::Contains("loss -") && !Catch::Contains("loss 0.000"));
  progress.Add(Record(1, 100, 200));
  CHECK_THAT(progress.Line(200), Catch::Contains("loss 0.500"));
}

TEST_CASE("JsonLinesFollower returns complete lines once, and Progress renders them", "[tools]") {
  const auto path = std::filesystem::temp_directory_path() / ("sketchps-follow-" + std::to_string(::getpid()));
  std::ofstream out(path);
  JsonLinesFollower follower(path.string());
  CHECK(follower.ReadNew().empty());
  out << Record(0, 100, 200, 1).dump() << "\n"
      << "{\"round\": 1" << std::flush;  // the second line is incomplete
  auto first = follower.ReadNew();
  REQUIRE(first.size() == 1);
  CHECK(first[0]["round"] == 0);
  out << ", \"loss\": 0.5, \"test_accuracy\": 0.8}\n" << std::flush;
  auto second = follower.ReadNew();
  REQUIRE(second.size() == 1);
  CHECK(second[0]["round"] == 1);
  CHECK(follower.ReadNew().empty());

  Progress progress(ProgressPlan{4, 0, 0, 10000});
  progress.Add(first[0]);
  progress.Add(second[0]);
  const std::string line = progress.Line(200);
  CHECK_THAT(line, Catch::Contains("2/4 [#####.....]") && Catch::Contains("acc 80.0%@r2") &&
                       Catch::Contains("40x/20x") && Catch::Contains("up 0.0MB down 0.0MB"));
  std::filesystem::remove(path);
}

namespace {

nlohmann::json Timed(int round, double time) {
  auto r = Record(round, 1e6, 2e6);
  r["time"] = time;
  return r;
}

}  // namespace

TEST_CASE("The progress line shows rate and ETA, names what it waits for and fits the width", "[tools]") {
  Progress progress(ProgressPlan{100, 10, 2000, 10000});
  progress.SetStatus("4 workers starting");
  const std::string before = progress.Line(80);
  CHECK(before == "0/100 [..........] waiting: 4 workers starting");  // no zeros before the first round
  progress.SetStatus("");
  for (int r = 0; r < 5; ++r) progress.Add(Timed(r, 1000.0 + 0.5 * r));  // 2 rounds per second
  CHECK(progress.RoundsPerSecond() == Approx(2.0));
  REQUIRE(progress.EtaSeconds());
  CHECK(*progress.EtaSeconds() == Approx(47.5));  // 95 rounds left
  CHECK(progress.Waiting().empty());              // round 6 has no evaluation
  const std::string full = progress.Line(200);
  CHECK_THAT(full, Catch::Contains("5/100") && Catch::Contains("2.00 r/s") && Catch::Contains("ETA 48s") &&
                       Catch::Contains("loss 0.200") && Catch::Contains("up 5.0MB down 10.0MB"));
  for (int r = 5; r < 9; ++r) progress.Add(Timed(r, 1000.0 + 0.5 * r));
  CHECK(progress.Waiting() == "round 10 + evaluation on 2000 test images");
  // A diverged worker writes its NaN loss as null: shown as nan, never an exception (it was one).
  auto diverged = Timed(8, 1004.0);
  diverged["loss"] = nullptr;
  diverged["bytes_up"] = "garbage";
  REQUIRE_NOTHROW(progress.Add(diverged));
  CHECK_THAT(progress.Line(200), Catch::Contains("loss nan"));
  for (int r = 9; r < 99; ++r) progress.Add(Timed(r, 1000.0 + 0.5 * r));
  CHECK(progress.Waiting() == "last round + final evaluation on 10000 test images");
  for (std::size_t width : {40, 60, 80, 120}) {
    INFO(width);
    const std::string line = progress.Line(width);
    CHECK(line.size() <= width);
    CHECK_THAT(line, Catch::StartsWith("99/100"));
  }
  CHECK_THAT(progress.Line(80), Catch::Contains("waiting: last round + final evaluation"));
  CHECK(FormatDuration(0.4) == "0s");
  CHECK(FormatDuration(59) == "59s");
  CHECK(FormatDuration(185) == "3m05s");
  CHECK(FormatDuration(3720) == "1h02m");
}

TEST_CASE("MarkdownReport writes one row per run and names a missing summary", "[tools]") {
  const auto dir = std::filesystem::temp_directory_path() / ("sketchps-report-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "a");
  std::ofstream(dir / "a" / "summary.json") << nlohmann::json{
      {"scheme", "topk"},
      {"mode", "ps"},
      {"workers", 4},
      {"servers", 2},
      {"epochs", 1.0},
      {"final_test_accuracy", 0.8512},
      {"bytes_up_per_worker_per_round", 1000.0},
      {"bytes_down_per_worker_per_round", 2000.0},
      {"compression_ratio_up", 88.0},
      {"compression_ratio_down", 44.0},
      {"rounds_per_second", 2.5},
      {"compute_seconds", 1.0},
      {"compress_seconds", 1.0},
      {"communicate_seconds", 2.0}}.dump();
  std::filesystem::create_directories(dir / "d");
  std::ofstream(dir / "d" / "summary.json") << nlohmann::json{
      {"scheme", "topk"},
      {"mode", "decentralized"},
      {"workers", 4},
      {"workers_at_end", 3},
      {"servers", 0}}.dump();
  std::filesystem::create_directories(dir / "old");
  std::ofstream(dir / "old" / "summary.json") << nlohmann::json{{"scheme", "dense"}}.dump();
  auto table = MarkdownReport({(dir / "a").string(), (dir / "d").string(), (dir / "old").string()});
  REQUIRE(table.ok());
  CHECK_THAT(*table, Catch::Contains(
                         "| topk | ps | 4 / 2 | 1.00 | 85.12% | 1000 | 2000 | 88.0x | 44.0x | 2.50 | 25 / 25 / 50 |"));
  CHECK_THAT(*table, Catch::Contains("| topk | decentralized | 4→3 / - | 0.00 | - |"));
  CHECK_THAT(*table, Catch::Contains("| dense | - | - | 0.00 | - |"));
  auto missing = MarkdownReport({(dir / "a").string(), (dir / "b").string()});
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("b/summary.json"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("Rounds sat out for a non-finite gradient are counted per rank and named with the first", "[tools]") {
  std::vector<std::vector<nlohmann::json>> metrics(3);
  for (int round = 0; round < 6; ++round) {
    for (auto& records : metrics) records.push_back(Record(round, 100, 400));
  }
  CHECK(DescribeSkippedRounds(metrics).empty());
  for (int round : {2, 4, 5}) metrics[1][round]["skipped"] = true;
  metrics[2][3]["skipped"] = true;
  metrics[0][1]["skipped"] = false;
  auto s = Summarize(Facts("topk", 3, 1, 10.0, 1.0, 1.0), metrics);
  REQUIRE(s.ok());
  CHECK((*s)["rounds_skipped"] == nlohmann::json::array({0, 3, 1}));
  const std::string note = DescribeSkippedRounds(metrics);
  CHECK_THAT(note, Catch::StartsWith("worker 1 sat out 3 rounds (the first round 2), worker 2 sat out 1 round (the "
                                     "first round 3) for a non-finite gradient"));
  CHECK_THAT(note, !Catch::Contains("worker 0"));
}
