#include <catch2/catch.hpp>

#include "job/job_spec.h"
#include "job/model_layout.h"

using namespace sketchps;

namespace {
absl::StatusOr<JobSpec> Custom(const std::string& layers) {
  return ParseJobSpec("model: custom\nlayers: " + layers + "\n", "test.yaml");
}
std::string Error(const std::string& layers) {
  auto r = Custom(layers);
  return r.ok() ? "" : std::string(r.status().message());
}
}  // namespace

TEST_CASE("model custom takes its layout from the layers key", "[model_layout]") {
  auto job = Custom(R"([["fc.weight", [10, 784]], ["fc.bias", [10]], ["scale", []]])");
  REQUIRE(job.ok());
  REQUIRE(job->layout.layers.size() == 3);
  CHECK(job->layout.layers[1].name == "fc.bias");
  CHECK(job->layout.layers[1].offset == 7840);
  CHECK(job->layout.layers[2].numel == 1);
  CHECK(job->layout.dim() == 7851);
  // LayoutText writes what CustomLayout reads back.
  auto again = Custom(LayoutText(job->layout));
  REQUIRE(again.ok());
  CHECK(LayoutText(again->layout) == LayoutText(job->layout));
}

TEST_CASE("model custom without layers parses with an empty layout", "[model_layout]") {
  auto job = ParseJobSpec("model: custom\n", "test.yaml");
  REQUIRE(job.ok());
  CHECK(job->layout.layers.empty());
}

TEST_CASE("Bad layers entries are named", "[model_layout]") {
  CHECK(Error("[]") == "layers: expected a non-empty list of [name, [dims...]]");
  CHECK(Error(R"([["a", [2]], ["b"]])") == "layers[1]: expected [name, [dims...]]");
  CHECK(Error(R"([["a", [2, 0]]])") == "layers[0]: 'a': dimensions must be integers >= 1");
  CHECK(Error(R"([["a", [2, x]]])") == "layers[0]: 'a': dimensions must be integers >= 1");
  CHECK(Error(R"([["a", [2]], ["a", [3]]])").find("layers: ") == 0);
  auto builtin = ParseJobSpec("model: mlp\nlayers: [[\"a\", [2]]]\n", "test.yaml");
  REQUIRE_FALSE(builtin.ok());
  CHECK(std::string(builtin.status().message()) == "layers: only with model: custom (model mlp has its own layout)");
}

TEST_CASE("The job fingerprint of a custom model covers its layout", "[model_layout]") {
  auto a = Custom(R"([["w", [4, 3]]])");
  auto b = Custom(R"([["w", [3, 4]]])");
  auto c = Custom(R"([["w", [4, 3]]])");
  REQUIRE((a.ok() && b.ok() && c.ok()));
  CHECK(a->fingerprint.at("model") != b->fingerprint.at("model"));
  CHECK(a->fingerprint.at("model") == c->fingerprint.at("model"));
}
