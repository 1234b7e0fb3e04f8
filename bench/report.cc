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
                   {"stream_pass_gbps", r.stream_pass_gbps},
                   {"ratio_to_stream_pass", r.ratio_to_stream_pass},
                   {"bytes_out", r.bytes_out}});
  }
  return out;
}

std::string ToTable(const std::vector<BenchResult>& results) {
  std::string out = absl::StrFormat("%-18s %11s %10s %10s %10s %12s %10s %14s\n", "method", "d", "density", "achieved",
                                    "ms", "ns/entry", "x stream", "bytes out");
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    out += absl::StrFormat("%-18s %11d %10.6f %10.6f %10.2f %12.3f %10.2f %14d\n", r.method, r.d, r.density_target,
                           r.density_achieved, r.seconds * 1e3, r.seconds * 1e9 / static_cast<double>(r.d),
                           r.ratio_to_stream_pass, r.bytes_out);
    if (i + 1 == results.size() || results[i + 1].d != r.d) {
      out += absl::StrFormat("stream pass (read-only sum) over d = %d: %.2f ms, %.1f GB/s\n", r.d,
                             r.stream_pass_seconds * 1e3, r.stream_pass_gbps);
    }
  }
  return out;
}

}  // namespace sketchps::bench
