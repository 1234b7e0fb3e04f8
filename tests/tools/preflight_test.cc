// The checks `sketchps run` makes before it starts any process (tools/preflight.h).
#include "tools/preflight.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

using namespace sketchps;

namespace {

absl::StatusOr<worker::DatasetSizes> Check(const std::vector<std::string>& overrides) {
  auto job = LoadJobSpec("", overrides);
  REQUIRE(job.ok());
  return tools::CheckJobRunnable(*job);
}

void RequireRefused(const std::vector<std::string>& overrides, const std::string& key) {
  INFO(overrides.back());
  auto checked = Check(overrides);
  REQUIRE(!checked.ok());
  CHECK_THAT(std::string(checked.status().message()), Catch::StartsWith(key));
}

// The preflight's advisories for the default job with `overrides` (the job must be runnable).
std::vector<std::string> Advisories(const std::vector<std::string>& overrides) {
  auto job = LoadJobSpec("", overrides);
  REQUIRE(job.ok());
  std::vector<std::string> out;
  REQUIRE(tools::CheckJobRunnable(*job, &out).ok());
  return out;
}

}  // namespace

TEST_CASE("A runnable job passes the preflight with the data set's sizes", "[tools]") {
  auto sizes = Check({"model=mlp", "workers=2", "servers=2"});
  REQUIRE(sizes.ok());
  CHECK(sizes->train == 60000);
  CHECK(sizes->test == 10000);
}

TEST_CASE("A job that cannot run is refused before any process starts, naming the key", "[tools]") {
  RequireRefused({"data.path=/nonexistent"}, "data.path: /nonexistent/train-images-idx3-ubyte.gz");
  RequireRefused({"data.path=/usr/share"}, "data.path: ");
  RequireRefused({"data.train_samples=70000"}, "data.train_samples: 70000 > the 60000 samples");
  RequireRefused({"workers=4", "data.batch_size=32", "data.train_samples=100"}, "data.train_samples: 100 < ");
  // The CNN's two shards hold about 110k entries each: 3 x 400000 cells is more than 8 per entry.
  RequireRefused({"scheme.name=sketched_sgd", "scheme.sketched_sgd.rows=3", "scheme.sketched_sgd.cols=400000"},
                 "scheme (sketched_sgd on cnn): shard 0: a sketch of 3 rows x 400000 columns (1200000 cells) is more "
                 "than a range of ");
  // An unknown model is caught when the job is read, before the preflight.
  auto job = LoadJobSpec("", {"model=resnet50"});
  REQUIRE(!job.ok());
  CHECK_THAT(std::string(job.status().message()), Catch::StartsWith("model: unknown model 'resnet50'"));
}

TEST_CASE("The preflight warns for sketch settings below the candidate rule and only for them", "[tools]") {
  // p2 x density = 8 x 0.001 < 0.01: a warning naming the scheme, the shard and the rule (shards with
  // the same text are told once).
  const auto low = Advisories({"scheme.name=gs_sgd", "scheme.density=0.001", "scheme.gs_sgd.p2=8"});
  REQUIRE(low.size() == 1);
  CHECK_THAT(low[0], Catch::StartsWith("scheme.gs_sgd, shard 0: "));
  CHECK_THAT(low[0], Catch::Contains("p2 x density < 0.01"));
  CHECK(Advisories({"scheme.name=gs_sgd", "scheme.density=0.001", "scheme.gs_sgd.p2=16"}).empty());
  CHECK(Advisories({"scheme.name=sketched_sgd", "scheme.density=0.001"}).size() == 1);
  CHECK(Advisories({"scheme.name=topk", "scheme.density=0.001"}).empty());
}

TEST_CASE("The preflight warns for a kept inner state under a Nesterov outer step and only there", "[tools]") {
  const std::vector<std::string> h4 = {"train.local_steps=4", "train.inner_state=keep"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), h4.begin(), h4.end());
    return Advisories(extra);
  };
  const auto nesterov = with({"train.outer_optimizer.name=nesterov"});
  REQUIRE(nesterov.size() == 1);
  CHECK_THAT(nesterov[0], Catch::StartsWith("train.inner_state: keep with train.outer_optimizer nesterov"));
  CHECK(with({"train.outer_optimizer.name=average"}).empty());
  CHECK(with({"train.outer_optimizer.name=nesterov", "train.outer_optimizer.momentum=0"}).empty());
  CHECK(Advisories({"train.local_steps=4", "train.outer_optimizer.name=nesterov"}).empty());  // reset
}

TEST_CASE("The preflight warns when the recovery floor's budget cannot afford the floor", "[tools]") {
  const std::vector<std::string> low = {"scheme.name=gs_sgd", "scheme.density=0.001"};
  // A budget that affords 1% of a shard silences the candidate rule; the floor's 3% does not fit 1.5x.
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), low.begin(), low.end());
    return Advisories(extra);
  };
  CHECK(with({"scheme.gs_sgd.budget_factor=3"}).empty());
  CHECK(with({"scheme.gs_sgd.budget_factor=3", "scheme.gs_sgd.recovery_floor=0.01"}).empty());
  const auto short_budget = with({"scheme.gs_sgd.budget_factor=1.5", "scheme.gs_sgd.recovery_floor=0.03"});
  REQUIRE(short_budget.size() == 1);
  CHECK_THAT(short_budget[0], Catch::Contains("recovery floor cannot hold"));
  CHECK_THAT(short_budget[0], Catch::Contains("budget_factor"));
  // budget_factor 1 (the default) still warns with the rule, naming budget_factor as a remedy.
  const auto plain = with({});
  REQUIRE(plain.size() == 1);
  CHECK_THAT(plain[0], Catch::Contains("budget_factor"));
}

TEST_CASE("optimizer.name external is refused for sketchps-worker and taken for script workers", "[tools]") {
  RequireRefused({"model=mlp", "workers=2", "optimizer.name=external", "optimizer.momentum=null"}, "optimizer.name");
  auto job = LoadJobSpec("", {"model=mlp", "workers=2", "optimizer.name=external", "optimizer.momentum=null",
                              "data.path=/nonexistent", "data.train_samples=640"});
  REQUIRE(job.ok());
  auto sizes = tools::CheckJobRunnable(*job, nullptr, /*script_workers=*/true);
  REQUIRE(sizes.ok());  // the script reads its own data: data.path is not checked
  CHECK(sizes->train == 640);
  CHECK(!tools::CheckJobRunnable(*job).ok());
}
