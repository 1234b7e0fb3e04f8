#include "job/job_spec.h"

#include <catch2/catch.hpp>

using namespace sketchps;

namespace {
std::string Error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  auto r = ParseJobSpec(yaml, "test.yaml", overrides);
  return r.ok() ? "" : std::string(r.status().message());
}
}  // namespace

TEST_CASE("The embedded default job parses and derives its round count", "[job_spec]") {
  auto job = LoadJobSpec("");
  REQUIRE(job.ok());
  CHECK(job->workers == 4);
  CHECK(job->servers == 2);
  CHECK(job->scheme.name == "gs_sgd");
  CHECK(job->rounds_per_epoch() == 468.0);  // floor(60000 / (4 * 32))
  CHECK(job->total_rounds() == 468);
  CHECK(job->scheme.make != nullptr);
}

TEST_CASE("Job spec values, overrides and the scheme section", "[job_spec]") {
  auto job = ParseJobSpec(
      "workers: 2\nscheme: {name: topk, density: 0.05, warmup_rounds: 3}\n"
      "optimizer: {lr: 0.1, schedule: cosine}\ntrain: {epochs: 2}\n",
      "t.yaml", {"workers=8", "train.rounds=50", "checkpoint.dir=/tmp/x"});
  REQUIRE(job.ok());
  CHECK(job->workers == 8);
  CHECK(job->total_rounds() == 50);
  CHECK(job->checkpoint.dir == "/tmp/x");
  CHECK(job->peer.timeout_seconds == 60);
  CHECK(job->peer.on_failure == OnPeerFailure::kRegroup);
  CHECK(job->mode == Mode::kPs);
  CHECK(job->train.eval_samples == 0);
  CHECK(job->scheme.density == 0.05);
  CHECK(job->optimizer.lr.kind == LrSchedule::Kind::kCosine);
  CHECK(job->optimizer.lr.total_epochs == 2.0);
  auto scheme = job->scheme.make(SchemeContext{0, 8, 0, 100, {}, 5, 1});
  CHECK(std::string(scheme->name()) == "topk");
  CHECK_THAT(job->effective_yaml, Catch::Contains("workers: 8"));
}

TEST_CASE("Job spec errors name the key", "[job_spec]") {
  CHECK(Error("workerz: 3\n") ==
        "config: unknown key 'workerz' (known: checkpoint, data, job_id, layers, mode, model, "
        "optimizer, peer, scheme, servers, train, workers)");
  CHECK(Error("peer: {timeout_seconds: 0}\n") == "peer.timeout_seconds: must be in (0, 86400]");
  CHECK(Error("peer: {on_failure: retry}\n") == "peer.on_failure: 'retry' is not regroup or stop");
  CHECK_THAT(Error("peer: {timeout: 3}\n"), Catch::Contains("unknown key 'timeout'"));
  CHECK(Error("workers: 0\n") == "workers: must be in [1, 1024]");
  CHECK(Error("workers: many\n") == "workers: expected an unsigned integer, got 'many'");
  CHECK_THAT(Error("scheme: {name: gsgd}\n"), Catch::StartsWith("scheme.name: unknown scheme 'gsgd'"));
  CHECK_THAT(Error("scheme: {name: topk, density: 2}\n"), Catch::StartsWith("scheme.density must be in (0, 1]"));
  CHECK_THAT(Error("scheme: {name: topk, dense: {}}\n"), Catch::Contains("scheme.dense: section for scheme 'dense'"));
  CHECK_THAT(Error("optimizer: {momentum: 1.5}\n"), Catch::StartsWith("optimizer.momentum"));
  CHECK_THAT(Error("optimizer: {schedule: linear}\n"), Catch::StartsWith("optimizer.schedule"));
  CHECK_THAT(Error("data: {batch_size: 0}\n"), Catch::StartsWith("data.batch_size"));
  CHECK_THAT(Error("mode: ring\n"), Catch::StartsWith("mode:"));
  CHECK_THAT(Error("workers: [1\n"), Catch::Contains("YAML syntax error"));
  CHECK_THAT(Error("", {"workers"}), Catch::Contains("expected key.path=value"));
  CHECK_THAT(Error("", {"workers.x=1", "workers.x.y=2"}), Catch::Contains("not a mapping"));
  CHECK(LoadJobSpec("/nonexistent/job.yaml").status().code() == absl::StatusCode::kNotFound);
}
