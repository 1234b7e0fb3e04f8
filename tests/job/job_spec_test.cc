#include "job/job_spec.h"

#include <filesystem>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/backend.h"

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
  CHECK(job->scheme.name == "topk");
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
  // The cosine schedule ends with the job, here its 50 rounds (not train.epochs).
  CHECK(job->optimizer.lr.total_epochs == Approx(50.0 / job->rounds_per_epoch()));
  auto scheme = job->scheme.make(SchemeContext{0, 8, 0, 100, {}, 5, 1});
  CHECK(std::string(scheme->name()) == "topk");
  CHECK_THAT(job->effective_yaml, Catch::Contains("workers: 8"));
}

TEST_CASE("Job spec warm-ups are spans resolved against the job's length", "[job_spec]") {
  // 468 rounds per epoch, 3 epochs: 1404 rounds.
  auto job = ParseJobSpec(
      "train: {epochs: 3}\nscheme: {name: topk, dense_warmup: 5%}\noptimizer: {warmup: [2 epochs, 234 rounds]}\n",
      "t.yaml", {});
  REQUIRE(job.ok());
  CHECK(job->clock().rounds_per_epoch == 468.0);
  CHECK(job->clock().total_rounds == 1404);
  CHECK(job->optimizer.lr.warmup_epochs == 0.5);  // the shorter term: 234 rounds
  CHECK(job->scheme.make(SchemeContext{0, 4, 0, 100, {}, 5, 1})->NumPhases() == 1);
  // dense_warmup 5% of 1404 = 70.2: rounds 0-70 are dense (ceil).
  const std::vector<float> g(1000, 1.0f);
  const kernels::DeviceArray<float> d_g(g);
  for (const auto& [round, dense] : std::vector<std::pair<std::uint64_t, bool>>{{70, true}, {71, false}}) {
    auto topk = job->scheme.make(SchemeContext{0, 4, 0, 1000, {}, 10, 1});
    REQUIRE(topk->BeginRound({round, 0.15}, d_g.data()).ok());
    auto sent = topk->Contribute(0, nullptr);
    REQUIRE(sent.ok());
    INFO("round " << round);
    CHECK((sent->spec.reduction == Reduction::kDenseSum) == dense);
  }
  // The round-1 keys still read, and not together with the new ones.
  auto old = ParseJobSpec("scheme: {name: topk, warmup_rounds: 3}\noptimizer: {warmup_epochs: 2}\n", "t.yaml", {});
  REQUIRE(old.ok());
  CHECK(old->optimizer.lr.warmup_epochs == 2.0);
  CHECK(Error("scheme: {name: topk, warmup_rounds: 3, dense_warmup: 3 rounds}\n") ==
        "scheme.warmup_rounds: give dense_warmup or warmup_rounds, not both");
  CHECK(Error("optimizer: {warmup: 1 epoch, warmup_epochs: 1}\n") ==
        "optimizer.warmup_epochs: give warmup or warmup_epochs, not both");
  CHECK_THAT(Error("scheme: {name: topk, dense_warmup: 3}\n"),
             Catch::StartsWith("scheme.dense_warmup: '3' has no unit"));
  CHECK_THAT(Error("optimizer: {warmup: soon}\n"), Catch::StartsWith("optimizer.warmup: 'soon' has no unit"));
}

TEST_CASE("Job spec errors name the key", "[job_spec]") {
  CHECK(Error("workerz: 3\n") ==
        "config: unknown key 'workerz' (known: checkpoint, data, job_id, layers, mode, model, "
        "optimizer, peer, ps, scheme, servers, train, workers)");
  CHECK(Error("peer: {timeout_seconds: 0}\n") == "peer.timeout_seconds: must be in (0, 86400]");
  CHECK(Error("ps: {round_deadline_seconds: -1}\n") ==
        "ps.round_deadline_seconds: must be in [0, 3600] (0: no deadline)");
  CHECK(Error("mode: decentralized\nps: {round_deadline_seconds: 0.5}\n") ==
        "ps.round_deadline_seconds: applies to mode: ps only (decentralized rounds have no deadline)");
  CHECK_THAT(Error("ps: {deadline: 3}\n"), Catch::Contains("unknown key 'deadline'"));
  CHECK(Error("mode: decentralized\nps: {elastic: true}\n") ==
        "ps.elastic: applies to mode: ps only (decentralized peers regroup instead: peer.on_failure)");
  CHECK(Error("ps: {initial_workers: 2}\n") == "ps.initial_workers: needs ps.elastic: true");
  CHECK(Error("workers: 4\nps: {elastic: true, initial_workers: 5}\n") ==
        "ps.initial_workers: must be in [1, workers = 4] (0: all)");
  CHECK_THAT(Error("ps: {elastic: true}\nscheme: {name: scalecom}\n"), Catch::StartsWith("ps.elastic: scalecom's"));
  CHECK_THAT(Error("ps: {elastic: true}\nscheme: {name: gs_sgd, gs_sgd: {budget_factor: 3}}\n"),
             Catch::StartsWith("ps.elastic: scheme.gs_sgd.budget_factor adapts"));
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
  CHECK(Error("train: {epochs: 1e300}\n") == "train.epochs: gives more than 1000000000000 rounds");
  CHECK(Error("train: {rounds: 18446744073709551615}\n") == "train.rounds: must be <= 1000000000000");
  CHECK(ParseJobSpec("scheme: {name: topk, dense_warmup: 1e300 epochs}\n", "t").ok());  // all dense, in range
  CHECK_THAT(Error("train: {epochs: 1e300}\nscheme: {name: dgc, dgc: {warmup: 10%}}\n"),
             Catch::StartsWith("train.epochs"));
  CHECK_THAT(Error("mode: ring\n"), Catch::StartsWith("mode:"));
  CHECK_THAT(Error("workers: [1\n"), Catch::Contains("YAML syntax error"));
  CHECK_THAT(Error("", {"workers"}), Catch::Contains("expected key.path=value"));
  CHECK_THAT(Error("", {"workers.x=1", "workers.x.y=2"}), Catch::Contains("not a mapping"));
  CHECK(LoadJobSpec("/nonexistent/job.yaml").status().code() == absl::StatusCode::kNotFound);
  CHECK(Error("workers: 2\nworkers: 4\n") == "workers: given twice");
  // Keys that would change nothing in this job.
  CHECK(Error("optimizer: {milestones: [1]}\n") ==
        "optimizer.milestones: only with optimizer.schedule: step (the schedule is constant)");
  CHECK(Error("optimizer: {schedule: cosine, gamma: 0.5}\n") ==
        "optimizer.gamma: only with optimizer.schedule: step (the schedule is cosine)");
  CHECK(Error("optimizer: {schedule: step, milestones: [1], min_lr: 0.001}\n") ==
        "optimizer.min_lr: only with optimizer.schedule: cosine (the schedule is step)");
  CHECK(Error("optimizer: {warmup_start_factor: 0.25}\n") ==
        "optimizer.warmup_start_factor: needs a warm-up (optimizer.warmup) for its ramp to start from");
  CHECK(ParseJobSpec("optimizer: {warmup: 1 epochs, warmup_start_factor: 0.25}\n", "t").ok());
  CHECK(ParseJobSpec("optimizer: {schedule: step, milestones: [1], gamma: 0.5}\n", "t").ok());
  CHECK_THAT(Error("optimizer: {nesterov: true}\nscheme: {name: dgc}\n"),
             Catch::StartsWith("optimizer.nesterov: scheme dgc keeps its own momentum"));
  CHECK(ParseJobSpec("optimizer: {nesterov: true}\nscheme: {name: topk}\n", "t").ok());
  CHECK(Error("scheme: {name: topk, density: 0.1, density: 0.2}\n") == "scheme.density: given twice");
  const auto dir = LoadJobSpec(std::filesystem::temp_directory_path().string());
  CHECK(dir.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(dir.status().message()), Catch::EndsWith("': is a directory, not a job file"));
}

TEST_CASE("optimizer.name external takes no optimizer settings and refuses what a torch optimizer cannot follow",
          "[job_spec]") {
  auto job = ParseJobSpec("optimizer: {name: external}\nscheme: {name: topk}\n", "t.yaml");
  REQUIRE(job.ok());
  CHECK(job->optimizer.kind == OptimizerKind::kExternal);
  CHECK_THAT(Error("optimizer: {name: external, betas: [0.9, 0.99]}\n"), Catch::StartsWith("optimizer.betas"));
  CHECK_THAT(Error("optimizer: {name: external, weight_decay: 0.1}\n"), Catch::StartsWith("optimizer.weight_decay"));
  CHECK_THAT(Error("optimizer: {name: external}\nscheme: {name: dgc}\n"), Catch::StartsWith("scheme.name"));
  CHECK_THAT(Error("optimizer: {name: external}\nmode: decentralized\n"), Catch::StartsWith("peer.on_failure"));
  CHECK(ParseJobSpec("optimizer: {name: external}\nmode: decentralized\npeer: {on_failure: stop}\n", "t").ok());
  CHECK_THAT(Error("optimizer: {name: rmsprop}\n"), Catch::StartsWith("optimizer.name"));
}

TEST_CASE("An elastic job starts with all its slots unless ps.initial_workers says fewer", "[job_spec]") {
  auto all = ParseJobSpec("workers: 6\nps: {elastic: true}\n", "test");
  INFO(all.status().message());
  REQUIRE(all.ok());
  CHECK(all->ps.elastic);
  CHECK(all->ps.initial_workers == 6);
  auto some = ParseJobSpec("workers: 6\nps: {elastic: true, initial_workers: 4}\n", "test");
  REQUIRE(some.ok());
  CHECK(some->ps.initial_workers == 4);
  CHECK(some->fingerprint.at("ps.elastic") != all->fingerprint.at("ps.elastic"));
  auto fixed = ParseJobSpec("workers: 6\n", "test");
  REQUIRE(fixed.ok());
  CHECK_FALSE(fixed->ps.elastic);
}

TEST_CASE("train.local_steps and train.outer_optimizer: defaults, DiLoCo's outer settings and rounds of H steps",
          "[job_spec]") {
  auto plain = LoadJobSpec("");
  REQUIRE(plain.ok());
  CHECK(plain->train.local_steps == 1);
  CHECK(plain->train.outer.kind == OuterOptimizerSpec::Kind::kAverage);
  CHECK_FALSE(plain->local_steps());
  CHECK(plain->replicated_optimizer().momentum == plain->optimizer.momentum);  // the job of today
  CHECK(plain->replicated_optimizer().lr.base_lr == plain->optimizer.lr.base_lr);

  // Explicit H = 1 with average is the same job, down to its fingerprint.
  auto same = LoadJobSpec("", {"train.local_steps=1", "train.outer_optimizer={name: average}"});
  REQUIRE(same.ok());
  CHECK_FALSE(same->local_steps());
  CHECK(same->fingerprint == plain->fingerprint);

  auto averaged = LoadJobSpec("", {"train.local_steps=4"});
  REQUIRE(averaged.ok());
  CHECK(averaged->local_steps());
  CHECK(averaged->rounds_per_epoch() == 117.0);  // floor(60000 / (4 * 32 * 4))
  CHECK(averaged->total_rounds() == 117);
  const OptimizerConfig avg = averaged->replicated_optimizer();
  CHECK(avg.kind == OptimizerKind::kSgd);
  CHECK(avg.lr.base_lr == 1.0);
  CHECK(avg.momentum == 0.0);
  CHECK_FALSE(avg.nesterov);
  CHECK(avg.weight_decay == 0.0);
  CHECK(averaged->optimizer.lr.base_lr == 0.05);  // the inner optimizer is the job's
  CHECK(averaged->fingerprint.at("train.local_steps") != plain->fingerprint.at("train.local_steps"));

  auto diloco = LoadJobSpec("", {"train.local_steps=8", "train.outer_optimizer.name=nesterov"});
  REQUIRE(diloco.ok());
  const OptimizerConfig outer = diloco->replicated_optimizer();
  CHECK(outer.lr.base_lr == 0.7);
  CHECK(outer.momentum == 0.9);
  CHECK(outer.nesterov);
  CHECK(outer.lr.kind == LrSchedule::Kind::kConstant);
  auto tuned = LoadJobSpec("", {"train.outer_optimizer={name: nesterov, lr: 0.5, momentum: 0.8}"});
  REQUIRE(tuned.ok());
  CHECK(tuned->local_steps());  // H = 1 with a nesterov outer step: DiLoCo with one inner step
  CHECK(tuned->replicated_optimizer().lr.base_lr == 0.5);
  CHECK(tuned->replicated_optimizer().momentum == 0.8);
  auto peers = LoadJobSpec("", {"train.local_steps=4", "mode=decentralized"});
  CHECK(peers.ok());
}

TEST_CASE("train.local_steps and train.outer_optimizer errors name the key", "[job_spec]") {
  CHECK_THAT(Error("train: {local_steps: 0}"), Catch::StartsWith("train.local_steps: must be >= 1"));
  CHECK_THAT(Error("train: {local_steps: 2.5}"), Catch::StartsWith("train.local_steps"));
  CHECK_THAT(Error("train: {local_steps: -3}"), Catch::StartsWith("train.local_steps"));
  CHECK_THAT(Error("train: {local_steps: four}"), Catch::StartsWith("train.local_steps"));
  CHECK_THAT(Error("train: {outer_optimizer: {name: adam}}"),
             Catch::StartsWith("train.outer_optimizer.name: 'adam' is not average or nesterov"));
  CHECK_THAT(Error("train: {outer_optimizer: {name: nesterov, beta: 0.9}}"),
             Catch::StartsWith("train.outer_optimizer: unknown key 'beta'"));
  CHECK_THAT(Error("train: {outer_optimizer: {lr: 0.5}}"),
             Catch::StartsWith("train.outer_optimizer.lr: not a key of average"));
  CHECK_THAT(Error("train: {outer_optimizer: {name: nesterov, lr: 0}}"),
             Catch::StartsWith("train.outer_optimizer.lr: must be in (0, 100]"));
  CHECK_THAT(Error("train: {outer_optimizer: {name: nesterov, momentum: 1}}"),
             Catch::StartsWith("train.outer_optimizer.momentum: must be in [0, 1)"));
  CHECK_THAT(Error("train: {outer_optimizer: nesterov}"), Catch::StartsWith("train.outer_optimizer"));
  // A torch optimizer's inner steps (the Python package); the outer optimizer is the replicated one.
  auto external = ParseJobSpec("train: {local_steps: 4}\noptimizer: {name: external}\n", "t.yaml");
  REQUIRE(external.ok());
  CHECK(external->replicated_optimizer().kind == OptimizerKind::kSgd);
  CHECK_THAT(Error("train: {local_steps: 4}\noptimizer: {name: adam, freeze_variance: 10 rounds}"),
             Catch::StartsWith("optimizer.freeze_variance"));
  CHECK_THAT(Error("train: {local_steps: 4, outer_optimizer: {name: nesterov}}\nscheme: {name: dgc}"),
             Catch::StartsWith("train.outer_optimizer.momentum: scheme dgc"));
  CHECK(Error("train: {local_steps: 4, outer_optimizer: {name: nesterov, momentum: 0}}\nscheme: {name: dgc}").empty());
}

TEST_CASE("train.inner_state: reset by default, keep carries the inner state, both named in the fingerprint",
          "[job_spec]") {
  auto local = LoadJobSpec("", {"train.local_steps=4"});
  REQUIRE(local.ok());
  CHECK_FALSE(local->train.keep_inner_state);
  auto reset = LoadJobSpec("", {"train.local_steps=4", "train.inner_state=reset"});
  REQUIRE(reset.ok());
  CHECK_FALSE(reset->train.keep_inner_state);
  CHECK(reset->fingerprint == local->fingerprint);  // every existing job keeps its fingerprint
  auto keep = LoadJobSpec("", {"train.local_steps=4", "train.inner_state=keep"});
  REQUIRE(keep.ok());
  CHECK(keep->train.keep_inner_state);
  CHECK(keep->fingerprint.at("train.local_steps") != local->fingerprint.at("train.local_steps"));
  auto diloco = LoadJobSpec("", {"train.outer_optimizer.name=nesterov", "train.inner_state=keep"});
  REQUIRE(diloco.ok());  // H = 1 with a nesterov outer step is local steps too
  CHECK(diloco->train.keep_inner_state);
  // A torch optimizer's inner steps keep their state in the script anyway: keep is accepted.
  CHECK(Error("train: {local_steps: 4, inner_state: keep}\noptimizer: {name: external}\n").empty());

  CHECK_THAT(Error("train: {local_steps: 4, inner_state: kept}"),
             Catch::StartsWith("train.inner_state: 'kept' is not reset or keep"));
  CHECK_THAT(Error("train: {inner_state: keep}"), Catch::StartsWith("train.inner_state: keep needs local steps"));
  CHECK_THAT(Error("train: {local_steps: 1, inner_state: keep}"), Catch::StartsWith("train.inner_state"));
  CHECK(Error("train: {inner_state: reset}").empty());
}
