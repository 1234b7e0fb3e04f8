#include "bench/loadgen/sweep.h"

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/loadgen/machine.h"
#include "bench/loadgen/server_fleet.h"
#include "common/config/cli.h"
#include "common/version.h"
#include "launch/binaries.h"
#include "launch/child.h"

namespace sketchps::bench {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kStreamFloats = std::size_t{256} << 20;  // 1 GiB: twice this machine's 508 MB last-level cache
constexpr double kKillSlackSeconds = 180;                      // after a child's own deadline

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
std::string Num(double x) { return absl::StrFormat("%.17g", x); }

std::string Minutes(double seconds) {
  return absl::StrFormat("%dm%02ds", static_cast<int>(seconds) / 60, static_cast<int>(seconds) % 60);
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The yardstick, measured once per sweep: one thread (what a shard's strand has: the servers run
// with OMP_NUM_THREADS=1) and every thread.
struct Stream {
  double one_thread = 0, all_threads = 0;
};

Stream MeasureStream() {
  std::fprintf(stderr, "loadgen: measuring the streaming-pass yardstick (%zu MB)\n", kStreamFloats * 4 >> 20);
  Stream s;
  if (auto one = StreamBytesPerSecond(kStreamFloats, 1); one.ok()) s.one_thread = *one;
  if (auto all = StreamBytesPerSecond(kStreamFloats, 0); all.ok()) s.all_threads = *all;
  return s;
}

std::vector<std::string> ChildArgv(const LoadgenOptions& o, const ConfigSpec& c, const fs::path& dir, double stream_bps,
                                   const std::string& server_dir) {
  std::vector<std::string> argv{launch::SelfExecutable(),
                                "loadgen",
                                "--single",
                                absl::StrCat(c.mode, ":", c.scheme, ":", c.workers),
                                "--servers",
                                std::to_string(o.servers),
                                o.params > 0 ? "--params" : "--model",
                                o.params > 0 ? std::to_string(o.params) : o.model,
                                "--density",
                                Num(o.density),
                                "--rounds",
                                std::to_string(o.rounds),
                                "--warmup-rounds",
                                std::to_string(o.warmup_rounds),
                                "--correlation",
                                Num(o.correlation),
                                "--seed",
                                std::to_string(o.seed),
                                "--epoch",
                                Num(o.epoch),
                                "--timeout-seconds",
                                Num(o.timeout_seconds),
                                "--work-dir",
                                dir.string(),
                                "--out",
                                (dir / "result.json").string(),
                                "--stream-bytes-per-second",
                                Num(stream_bps)};
  if (!server_dir.empty()) argv.insert(argv.end(), {"--bin-dir", server_dir});
  if (!o.gradients_dir.empty()) argv.insert(argv.end(), {"--gradients", o.gradients_dir});
  for (const auto& kv : o.overrides) argv.insert(argv.end(), {"--set", kv});
  return argv;
}

// Appends the new complete lines of `path` (from *offset) to stderr.
void ForwardLog(const fs::path& path, std::uintmax_t* offset) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec || size <= *offset) return;
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(*offset));
  std::string chunk(size - *offset, '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  const auto last_newline = chunk.rfind('\n');
  if (last_newline == std::string::npos) return;
  std::fwrite(chunk.data(), 1, last_newline + 1, stderr);
  std::fflush(stderr);
  *offset += last_newline + 1;
}

void KillListedPids(const fs::path& pid_file) {
  std::ifstream in(pid_file);
  pid_t pid = 0;
  while (in >> pid) {
    if (pid > 1) kill(pid, SIGKILL);
  }
}

// How one child ended.
struct ChildOutcome {
  std::optional<nlohmann::json> result;  // the configuration's record
  std::string error;                     // otherwise
  bool interrupted = false;              // a termination signal arrived: the sweep stops
};

// Waits for the child, forwarding its log; stops it on a signal or long past its deadline.
ChildOutcome Supervise(launch::Child& child, const fs::path& dir, double timeout_seconds) {
  const fs::path log = child.log_path();
  std::uintmax_t offset = 0;
  const auto hard_deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(timeout_seconds + kKillSlackSeconds));
  ChildOutcome out;
  std::optional<int> code;
  while (!(code = child.Poll())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ForwardLog(log, &offset);
    if (const std::string sig = PendingTerminationSignal(); !sig.empty()) {
      std::fprintf(stderr, "loadgen: %s: stopping the sweep\n", sig.c_str());
      out.interrupted = true;
      out.error = absl::StrCat("interrupted by ", sig);
      code = child.Stop(absl::Seconds(30));  // its own stop takes seconds; a cut run must still write its --out
    } else if (Clock::now() > hard_deadline) {
      out.error = absl::StrFormat("did not stop %.0f s after its --timeout-seconds %.0f; killed", kKillSlackSeconds,
                                  timeout_seconds);
      code = child.Stop(absl::Seconds(5));
    }
  }
  ForwardLog(log, &offset);
  if (!out.error.empty()) KillListedPids(dir / "server.pids");  // its servers, if it could not stop them
  return out;
}

// The child's result.json: its record, or its error.
void ReadResult(const fs::path& dir, int code, ChildOutcome& out) {
  nlohmann::json record;
  if (fs::exists(dir / "result.json")) {
    try {
      record = nlohmann::json::parse(ReadFile(dir / "result.json"));
    } catch (const std::exception& e) {
      record = {{"error", absl::StrCat("unreadable result: ", e.what())}};
    }
  }
  if (record.contains("result")) {
    out.result = record["result"];
  } else if (record.contains("error")) {
    out.error = record["error"].get<std::string>();
  } else if (out.error.empty()) {
    out.error = absl::StrCat("exited with code ", code, " without a result");
  }
}

ChildOutcome RunChild(const LoadgenOptions& o, const ConfigSpec& c, const fs::path& dir, double stream_bps,
                      const std::string& server_dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::remove(dir / "result.json", ec);
  fs::remove(dir / "loadgen.log", ec);
  auto child = launch::Child::Start(ConfigName(c), ChildArgv(o, c, dir, stream_bps, server_dir),
                                    (dir / "loadgen.log").string(), {"OMP_NUM_THREADS=1", "OMP_WAIT_POLICY=PASSIVE"});
  if (!child.ok()) return ChildOutcome{std::nullopt, std::string(child.status().message()), false};
  ChildOutcome out = Supervise(*child, dir, o.timeout_seconds);
  ReadResult(dir, child->Poll().value_or(-1), out);
  return out;
}

nlohmann::json SweepHeader(const LoadgenOptions& o, const Stream& stream) {
  return nlohmann::json{
      {"generator", "sketchps loadgen"},
      {"version", Version()},
      {"date", UtcNow()},
      {"machine", MachineInfo()},
      {"load_average_start", LoadAverage()},
      {"job", absl::StrFormat("%s, density %g, %d warm-up + %d timed rounds, %s",
                              o.params > 0 ? absl::StrCat("flat layout of ", o.params, " parameters")
                                           : absl::StrCat("model ", o.model),
                              o.density, o.warmup_rounds, o.rounds,
                              o.gradients_dir.empty()
                                  ? absl::StrFormat("synthetic Student-t(3) gradients, correlation %.3g", o.correlation)
                                  : absl::StrCat("real gradients from ", o.gradients_dir))},
      {"options",
       {{"modes", o.modes},
        {"workers", o.workers},
        {"servers", o.servers},
        {"schemes", o.schemes.empty() ? DefaultSchemes() : o.schemes},
        {"model", o.params > 0 ? std::string("custom") : o.model},
        {"params", o.params},
        {"density", o.density},
        {"rounds", o.rounds},
        {"warmup_rounds", o.warmup_rounds},
        {"overrides", o.overrides},
        {"gradients", o.gradients_dir},
        {"correlation", o.correlation},
        {"seed", o.seed},
        {"epoch", o.epoch}}},
      {"stream",
       {{"floats", kStreamFloats},
        {"bytes_per_second_1_thread", stream.one_thread},
        {"bytes_per_second_all_threads", stream.all_threads}}}};
}

std::optional<fs::path> WorkDir(const LoadgenOptions& o) {
  if (!o.work_dir.empty()) return fs::path(o.work_dir);
  std::string tmpl = (fs::temp_directory_path() / "sketchps-loadgen-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return std::nullopt;
  return fs::path(tmpl);
}

// "[3/95] ps topk P=16 (1m10s in, ~20m left)".
void AnnounceConfig(std::size_t i, std::size_t n, const ConfigSpec& c, double elapsed) {
  const std::string left = i == 0 ? "" : absl::StrCat(", ~", Minutes(elapsed / i * (n - i)), " left");
  std::fprintf(stderr, "loadgen: [%zu/%zu] %s (%s in%s)\n", i + 1, n, ConfigName(c).c_str(), Minutes(elapsed).c_str(),
               left.c_str());
}

bool WriteDocument(const nlohmann::json& doc, const LoadgenOptions& o) {
  if (!o.out.empty()) {
    std::ofstream out(o.out);
    out << doc.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "sketchps loadgen: --out %s: cannot write\n", o.out.c_str());
      return false;
    }
  }
  if (o.json) {
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << ResultsTable(doc["results"]);
  }
  return true;
}

}  // namespace

std::string ResultsTable(const nlohmann::json& results) {
  std::string s = absl::StrFormat("%-14s %-13s %5s %12s %12s %12s %12s %14s %9s\n", "mode", "scheme", "P", "wire up",
                                  "wire down", "raw up", "raw down", "busiest link", "rounds/s");
  for (const auto& r : results) {
    const auto& b = r["per_worker_per_round"];
    s += absl::StrFormat("%-14s %-13s %5d %12.0f %12.0f %12.0f %12.0f %14.0f %9.2f\n", r["mode"].get<std::string>(),
                         r["scheme"].get<std::string>(), r["workers"].get<int>(), b["wire_up"].get<double>(),
                         b["wire_down"].get<double>(), b["raw_up"].get<double>(), b["raw_down"].get<double>(),
                         r["busiest_server_link_bytes_per_round"].get<double>(), r["rounds_per_second"].get<double>());
  }
  return s;
}

int RunSweep(const LoadgenOptions& o) {
  std::string server_dir;
  if (std::find(o.modes.begin(), o.modes.end(), "ps") != o.modes.end()) {
    auto server = launch::FindBinary(launch::Program::kServer, o.bin_dir);
    if (!server.ok()) {
      std::fprintf(stderr, "sketchps loadgen: %s\n", std::string(server.status().message()).c_str());
      return 2;
    }
    server_dir = fs::path(*server).parent_path().string();
  }
  const std::optional<fs::path> work = WorkDir(o);
  if (!work) {
    std::fprintf(stderr, "sketchps loadgen: cannot create a work directory in %s\n", fs::temp_directory_path().c_str());
    return 2;
  }
  const Stream stream = MeasureStream();
  nlohmann::json doc = SweepHeader(o, stream);
  nlohmann::json results = nlohmann::json::array(), failures = nlohmann::json::array();
  const std::vector<ConfigSpec> configs = SweepConfigs(o);
  const auto start = Clock::now();
  bool interrupted = false;
  for (std::size_t i = 0; i < configs.size() && !interrupted; ++i) {
    const ConfigSpec& c = configs[i];
    AnnounceConfig(i, configs.size(), c, Seconds(Clock::now() - start));
    const fs::path dir = *work / absl::StrCat(c.mode, "-", c.scheme, "-p", c.workers);
    ChildOutcome r = RunChild(o, c, dir, stream.one_thread, server_dir);
    interrupted = r.interrupted;
    if (r.result) {
      results.push_back(*r.result);
      continue;
    }
    failures.push_back({{"mode", c.mode},
                        {"scheme", c.scheme},
                        {"workers", c.workers},
                        {"error", r.error},
                        {"log", (dir / "loadgen.log").string()}});
    std::fprintf(stderr, "loadgen: %s FAILED: %s (log: %s)\n", ConfigName(c).c_str(), r.error.c_str(),
                 (dir / "loadgen.log").c_str());
  }
  doc["results"] = results;
  doc["failures"] = failures;
  doc["load_average_end"] = LoadAverage();
  doc["sweep_seconds"] = Seconds(Clock::now() - start);
  if (!WriteDocument(doc, o)) return 2;
  const bool ok = failures.empty() && !interrupted;
  std::error_code ec;
  if (ok && o.work_dir.empty()) fs::remove_all(*work, ec);
  if (!ok) std::fprintf(stderr, "loadgen: %zu configuration(s) failed; logs in %s\n", failures.size(), work->c_str());
  return interrupted ? 130 : ok ? 0 : 1;
}

}  // namespace sketchps::bench
