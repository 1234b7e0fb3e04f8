// Timing loop of `sketchps bench` (see primitives.h); the methods live in methods.cc.
#include "bench/primitives.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/workspace.h"
#include "common/status.h"
#include "kernels/bandwidth.h"
#include "kernels/vector_ops.h"

namespace sketchps::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<float> HeavyTailedGradient(std::uint64_t d, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::student_t_distribution<float> t3(3.0f);
  std::vector<float> g(d);
  for (auto& v : g) v = 1e-3f * t3(rng);  // gradient-like scale
  return g;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of `repeats` timed calls of fn, after one untimed warm-up call.
template <class Fn>
absl::StatusOr<double> TimeMedian(Workspace& ws, int repeats, const std::function<absl::Status(Workspace&)>& prepare,
                                  Fn&& fn) {
  std::vector<double> times;
  for (int i = 0; i <= repeats; ++i) {
    if (prepare) SKETCHPS_RETURN_IF_ERROR(prepare(ws));
    kernels::Synchronize(ws.exec);
    const auto start = Clock::now();
    SKETCHPS_RETURN_IF_ERROR(fn());
    kernels::Synchronize(ws.exec);
    if (i > 0) times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return Median(std::move(times));
}

// Median over repeats of the yardstick's time on the device alone, after one untimed pass.
absl::StatusOr<double> DeviceMedian(Workspace& ws) {
  std::vector<double> times;
  for (int i = 0; i <= ws.options.repeats; ++i) {
    SKETCHPS_ASSIGN_OR_RETURN(const double seconds, kernels::BandwidthPassDeviceSeconds(ws.grad.data(), ws.d, ws.exec));
    if (i > 0) times.push_back(seconds);
  }
  return Median(std::move(times));
}

// The yardstick, SumAbs (the previous yardstick) and the yardstick's device time as result rows,
// the yardstick first.
absl::StatusOr<std::vector<BenchResult>> StreamPassRows(Workspace& ws) {
  SKETCHPS_ASSIGN_OR_RETURN(const double pass, TimeMedian(ws, ws.options.repeats, nullptr, [&]() -> absl::Status {
                              return kernels::BandwidthSum(ws.grad.data(), ws.d, ws.exec).status();
                            }));
  SKETCHPS_ASSIGN_OR_RETURN(const double sum_abs, TimeMedian(ws, ws.options.repeats, nullptr, [&]() -> absl::Status {
                              return kernels::SumAbs(ws.grad.data(), ws.d, ws.exec).status();
                            }));
  SKETCHPS_ASSIGN_OR_RETURN(const double on_device, DeviceMedian(ws));
  std::vector<BenchResult> rows(3);
  rows[0].method = kStreamPassRow;
  rows[0].seconds = pass;
  rows[1].method = kSumAbsRow;
  rows[1].seconds = sum_abs;
  rows[2].method = kStreamPassDeviceRow;
  rows[2].seconds = on_device;
  for (auto& r : rows) {
    r.d = ws.d;
    r.density_target = ws.options.density;
    r.stream_pass_seconds = pass;
    r.stream_pass_gbps = static_cast<double>(ws.d * sizeof(float)) / pass * 1e-9;
    r.ratio_to_stream_pass = r.seconds / pass;
    r.bytes_out = 0;
  }
  return rows;
}

absl::StatusOr<BenchResult> RunMethod(const Method& method, Workspace& ws, const BenchResult& pass) {
  Outcome outcome;
  SKETCHPS_ASSIGN_OR_RETURN(const double seconds,
                            TimeMedian(ws, ws.options.repeats, method.prepare, [&]() -> absl::Status {
                              SKETCHPS_ASSIGN_OR_RETURN(outcome, method.run(ws));
                              return absl::OkStatus();
                            }));
  BenchResult r = pass;
  r.method = method.name;
  r.density_achieved = static_cast<double>(outcome.selected) / static_cast<double>(ws.d);
  r.seconds = seconds;
  r.ratio_to_stream_pass = seconds / pass.stream_pass_seconds;
  r.bytes_out = outcome.bytes_out;
  return r;
}

bool Selected(const BenchOptions& options, const std::string& name) {
  const auto& m = options.methods;
  return m.empty() || std::find(m.begin(), m.end(), name) != m.end();
}

// Every selected method at gradient length d, after the two stream-pass rows.
absl::Status RunOneLength(const BenchOptions& options, std::uint64_t d,
                          const std::function<void(const std::string&)>& say, std::vector<BenchResult>& results) {
  BenchOptions one = options;
  one.d = {d};
  say(absl::StrFormat("d = %d: generating Student-t3 gradient entries (seed %d)", d, options.seed));
  Workspace ws(one, d, HeavyTailedGradient(d, options.seed));
  say(absl::StrFormat("backend %s, %d-way parallel; timing the stream pass", kernels::BackendName(),
                      kernels::BackendParallelism()));
  SKETCHPS_ASSIGN_OR_RETURN(auto pass_rows, StreamPassRows(ws));
  const BenchResult pass = pass_rows.front();
  results.insert(results.end(), pass_rows.begin(), pass_rows.end());
  const std::size_t total = options.methods.empty() ? Methods().size() : options.methods.size();
  std::size_t done = 0;
  for (const auto& method : Methods()) {
    if (!Selected(options, method.name)) continue;
    say(absl::StrFormat("d = %d [%d/%d] %s", d, ++done, total, method.name));
    SKETCHPS_ASSIGN_OR_RETURN(auto result, RunMethod(method, ws, pass));
    results.push_back(std::move(result));
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& AllMethods() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& m : Methods()) n.push_back(m.name);
    return n;
  }();
  return names;
}

absl::Status ValidateOptions(const BenchOptions& o) {
  if (o.d.empty()) return absl::InvalidArgumentError("--d needs at least one value");
  for (const std::uint64_t d : o.d) {
    if (d == 0 || d >= (std::uint64_t{1} << 32)) {
      return absl::InvalidArgumentError(absl::StrCat("--d must be in [1, 2^32), got ", d));
    }
  }
  if (!(o.density > 0.0 && o.density <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("--density must be in (0, 1], got ", o.density));
  }
  if (o.repeats < 1) return absl::InvalidArgumentError(absl::StrCat("--repeats must be >= 1, got ", o.repeats));
  if (o.sketch_rows < 1 || o.sketch_rows > 64) {
    return absl::InvalidArgumentError(absl::StrCat("--sketch-rows must be in [1, 64], got ", o.sketch_rows));
  }
  for (const auto& m : o.methods) {
    if (std::find(AllMethods().begin(), AllMethods().end(), m) == AllMethods().end()) {
      return absl::InvalidArgumentError(absl::StrCat("--methods: unknown method '", m, "'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<BenchResult>> RunBenchmarks(const BenchOptions& options,
                                                       const std::function<void(const std::string&)>& progress) {
  SKETCHPS_RETURN_IF_ERROR(ValidateOptions(options));
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  std::vector<BenchResult> results;
  for (const std::uint64_t d : options.d) SKETCHPS_RETURN_IF_ERROR(RunOneLength(options, d, say, results));
  return results;
}

Workspace::Workspace(const BenchOptions& o, std::uint64_t length, std::vector<float> host_gradient)
    : options(o),
      d(length),
      k(std::max<std::uint64_t>(1, static_cast<std::uint64_t>(o.density * static_cast<double>(length)))),
      sketch_cols(o.sketch_cols ? o.sketch_cols
                                : static_cast<std::uint32_t>(std::min<std::uint64_t>(10 * k, 1u << 30))),
      exec{nullptr, &scratch},
      grad(host_gradient),
      out_idx(length),
      out_val(length) {
  auto h = CountSketchHash::Create({o.sketch_rows, sketch_cols, o.seed, length});
  if (h.ok()) hash = *h;  // ValidateOptions checked rows; a bad cols count fails in the sketch methods
  table = kernels::DeviceArray<float>(hash.cells());
  other_table = kernels::DeviceArray<float>(hash.cells());
}

}  // namespace sketchps::bench
