// Timing loop of `sketchps bench` (see primitives.h); the methods live in methods.cc.
#include "bench/primitives.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/workspace.h"
#include "common/status.h"
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

absl::StatusOr<double> StreamPassSeconds(Workspace& ws) {
  return TimeMedian(ws, ws.options.repeats, nullptr, [&]() -> absl::Status {
    return kernels::SumAbs(ws.grad.data(), ws.d, ws.exec).status();
  });
}

absl::StatusOr<BenchResult> RunMethod(const Method& method, Workspace& ws, double stream_seconds) {
  Outcome outcome;
  SKETCHPS_ASSIGN_OR_RETURN(const double seconds, TimeMedian(ws, ws.options.repeats, method.prepare, [&]() -> absl::Status {
    SKETCHPS_ASSIGN_OR_RETURN(outcome, method.run(ws));
    return absl::OkStatus();
  }));
  BenchResult r;
  r.method = method.name;
  r.d = ws.d;
  r.density_target = ws.options.density;
  r.density_achieved = static_cast<double>(outcome.selected) / static_cast<double>(ws.d);
  r.seconds = seconds;
  r.stream_pass_seconds = stream_seconds;
  r.ratio_to_stream_pass = seconds / stream_seconds;
  r.bytes_out = outcome.bytes_out;
  return r;
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
  if (o.d == 0 || o.d >= (std::uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(absl::StrCat("--d must be in [1, 2^32), got ", o.d));
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
  auto say = [&](const std::string& line) { if (progress) progress(line); };
  say(absl::StrFormat("generating %d Student-t3 gradient entries (seed %d)", options.d, options.seed));
  Workspace ws(options, HeavyTailedGradient(options.d, options.seed));
  say(absl::StrFormat("backend %s, %d-way parallel; timing the streaming pass", kernels::BackendName(),
                      kernels::BackendParallelism()));
  SKETCHPS_ASSIGN_OR_RETURN(const double stream_seconds, StreamPassSeconds(ws));
  std::vector<BenchResult> results;
  for (const auto& method : Methods()) {
    if (!options.methods.empty() &&
        std::find(options.methods.begin(), options.methods.end(), method.name) == options.methods.end()) {
      continue;
    }
    say(absl::StrFormat("[%d/%d] %s", results.size() + 1,
                        options.methods.empty() ? Methods().size() : options.methods.size(), method.name));
    SKETCHPS_ASSIGN_OR_RETURN(auto result, RunMethod(method, ws, stream_seconds));
    results.push_back(std::move(result));
  }
  return results;
}

Workspace::Workspace(const BenchOptions& o, std::vector<float> host_gradient)
    : options(o),
      d(o.d),
      k(std::max<std::uint64_t>(1, static_cast<std::uint64_t>(o.density * static_cast<double>(o.d)))),
      sketch_cols(o.sketch_cols ? o.sketch_cols : static_cast<std::uint32_t>(std::min<std::uint64_t>(10 * k, 1u << 30))),
      exec{nullptr, &scratch},
      grad(host_gradient),
      out_idx(o.d),
      out_val(o.d) {
  auto h = CountSketchHash::Create({o.sketch_rows, sketch_cols, o.seed, o.d});
  if (h.ok()) hash = *h;  // ValidateOptions checked rows; a bad cols count fails in the sketch methods
  table = kernels::DeviceArray<float>(hash.cells());
  other_table = kernels::DeviceArray<float>(hash.cells());
}

}  // namespace sketchps::bench
