#include "bench/report.h"

#include "absl/strings/str_format.h"

namespace sketchps::bench {

nlohmann::json ToJson(const std::vector<BenchResult>& results) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : results) {
    out.push_back({{"method", r.method},
                   {"d", r.d},
                   {"density_target", r.density_target},
                   {"density_achieved", r.density_achieved},
                   {"seconds", r.seconds},
                   {"stream_pass_seconds", r.stream_pass_seconds},
                   {"ratio_to_stream_pass", r.ratio_to_stream_pass},
                   {"bytes_out", r.bytes_out}});
  }
  return out;
}

std::string ToTable(const std::vector<BenchResult>& results) {
  std::string out = absl::StrFormat("%-18s %12s %12s %10s %12s %14s\n", "method", "density", "achieved",
                                    "ms", "x stream", "bytes out");
  for (const auto& r : results) {
    out += absl::StrFormat("%-18s %12.6f %12.6f %10.2f %12.2f %14d\n", r.method, r.density_target,
                           r.density_achieved, r.seconds * 1e3, r.ratio_to_stream_pass, r.bytes_out);
  }
  if (!results.empty()) {
    out += absl::StrFormat("stream pass (sum |g|) over d = %d: %.2f ms\n", results.front().d,
                           results.front().stream_pass_seconds * 1e3);
  }
  return out;
}

}  // namespace sketchps::bench
