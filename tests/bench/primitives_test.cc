// `sketchps bench` (bench/primitives.h): the rows it reports for each gradient length, the
// yardstick's own ratio, what a selection achieves against its target, and options that name
// themselves when they are wrong.
#include "bench/primitives.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "bench/report.h"

namespace sb = sketchps::bench;

TEST_CASE("Each length reports the three yardstick rows and then the methods", "[primitives]") {
  sb::BenchOptions options;
  options.d = {4096, 1000};
  options.methods = {"topk"};
  options.repeats = 1;
  options.density = 0.01;
  std::vector<std::string> said;
  const auto results = sb::RunBenchmarks(options, [&](const std::string& line) { said.push_back(line); });
  REQUIRE(results.ok());
  REQUIRE(results->size() == 8);
  const std::vector<std::string> order = {sb::kStreamPassRow, sb::kSumAbsRow, sb::kStreamPassDeviceRow, "topk"};
  for (std::size_t i = 0; i < results->size(); ++i) {
    const auto& r = (*results)[i];
    INFO("row " << i << ": " << r.method);
    CHECK(r.method == order[i % 4]);
    CHECK(r.d == options.d[i / 4]);
    CHECK(r.seconds > 0.0);
    CHECK(r.ratio_to_stream_pass == Approx(r.seconds / r.stream_pass_seconds));
  }
  CHECK((*results)[0].ratio_to_stream_pass == 1.0);
  CHECK((*results)[0].stream_pass_gbps == Approx(4096.0 * 4 / (*results)[0].seconds * 1e-9));
  // top-k selects exactly k = 1% of 4096 = 40 entries, 8 bytes each on the wire.
  CHECK((*results)[3].density_achieved == Approx(40.0 / 4096));
  CHECK((*results)[3].bytes_out == 40 * 8);
  CHECK_FALSE(said.empty());
  const auto json = sb::ToJson(*results).dump();
  CHECK(json.find("\"stream_pass_device\"") != std::string::npos);
}

TEST_CASE("Bad bench options are refused, naming the option", "[primitives]") {
  sb::BenchOptions options;
  options.d = {0};
  CHECK(sb::RunBenchmarks(options, nullptr).status().message() == "--d must be in [1, 2^32), got 0");
  options.d = {100};
  options.methods = {"nope"};
  CHECK(sb::RunBenchmarks(options, nullptr).status().message() == "--methods: unknown method 'nope'");
  options.methods = {};
  options.repeats = 0;
  CHECK(sb::RunBenchmarks(options, nullptr).status().message() == "--repeats must be >= 1, got 0");
}
