// The round deadline (engine/phase_table.h "Round deadline"): phases closed without late workers,
// what those workers are told, and what their schemes keep (Scheme::FinishExcluded), against
// independent references: the sums of the on-time payloads, and a scheme that never was left out.
#include <algorithm>
#include <cmath>
#include <map>
#include <thread>

#include <catch2/catch.hpp>

#include "engine/aggregator.h"
#include "engine/phase_table.h"
#include "engine/reduce.h"
#include "engine/round.h"
#include "kernels/backend.h"
#include "schemes/dense.h"
#include "schemes/topk_ef.h"

using namespace sketchps;

namespace {

Contribution Dense(std::vector<float> v, bool final_phase = true) {
  Contribution c{{Reduction::kDenseSum}, PayloadValue{DenseValues{std::move(v)}}};
  c.spec.final_phase = final_phase;
  return c;
}

PhaseTableOptions Options(std::uint32_t workers, Reducer& reducer, absl::Duration deadline) {
  PhaseTableOptions o;
  o.num_workers = workers;
  o.reduce = [&reducer](const PhaseSpec& spec, const std::vector<const Contribution*>& in, const PhaseResult* prev) {
    return reducer.Reduce(spec, in, prev);
  };
  o.deadline = deadline;
  return o;
}

std::shared_ptr<const PhaseResult> Result(PhaseTable& table, const PhaseKey& key) {
  auto r = table.Await(key, absl::Now() + absl::Seconds(5));
  REQUIRE(r.ok());
  return *r;
}

const std::vector<float>& Values(const PhaseResult& r) { return std::get<DenseValues>(r.value).values; }

// A worker's aggregator straight on a table (what the parameter server does, without gRPC).
class TableAggregator final : public Aggregator {
 public:
  TableAggregator(PhaseTable& table, std::uint32_t worker, std::uint32_t workers)
      : table_(table), worker_(worker), workers_(workers) {}
  absl::StatusOr<std::shared_ptr<const PhaseResult>> RunPhase(std::uint32_t, std::uint64_t round, std::uint32_t phase,
                                                              Contribution contribution) override {
    const PhaseKey key{round, phase};
    if (auto st = table_.Submit(key, worker_, std::move(contribution)); !st.ok()) return st;
    return table_.Await(key, absl::Now() + absl::Seconds(10));
  }
  std::uint32_t worker_id() const override { return worker_; }
  std::uint32_t num_workers() const override { return workers_; }

 private:
  PhaseTable& table_;
  const std::uint32_t worker_;
  const std::uint32_t workers_;
};

SchemeContext Context(std::uint32_t worker, std::uint32_t workers, std::uint64_t dim, std::uint64_t k, bool left_out) {
  SchemeContext ctx;
  ctx.worker_id = worker;
  ctx.num_workers = workers;
  ctx.dim = dim;
  ctx.k = k;
  ctx.seed = 7;
  ctx.may_be_left_out = left_out;
  return ctx;
}

// Distinct magnitudes (no ties for top-k to break).
std::vector<float> Gradient(std::uint64_t dim, float scale, float shift) {
  std::vector<float> g(dim);
  for (std::uint64_t i = 0; i < dim; ++i) g[i] = scale * std::sin(1.3f * static_cast<float>(i) + shift);
  return g;
}

// The k entries of largest magnitude, by a full sort: index -> value.
std::map<std::uint32_t, float> NaiveTopK(const std::vector<float>& g, std::size_t k) {
  std::vector<std::uint32_t> order(g.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return std::fabs(g[a]) > std::fabs(g[b]); });
  std::map<std::uint32_t, float> top;
  for (std::size_t i = 0; i < k; ++i) top[order[i]] = g[order[i]];
  return top;
}

}  // namespace

TEST_CASE("A round deadline closes a phase without the late worker, and tells it", "[round_deadline]") {
  Reducer reducer(2);
  PhaseTable table(Options(3, reducer, absl::Seconds(1)));
  const PhaseKey key{0, 0};
  REQUIRE(table.Submit(key, 0, Dense({1, 2})).ok());
  REQUIRE(table.Submit(key, 2, Dense({10, 20})).ok());
  CHECK(table.CloseExpired(absl::Now()).empty());  // not expired yet
  const auto closed = table.CloseExpired(absl::Now() + absl::Seconds(2));
  REQUIRE(closed.size() == 1);
  CHECK(closed[0].key == key);
  CHECK(closed[0].left_out == std::vector<std::uint32_t>{1});
  const auto r = Result(table, key);
  CHECK(Values(*r) == std::vector<float>{11, 22});  // the on-time payloads only
  CHECK(r->contributors == 2);
  CHECK(r->excluded == std::vector<std::uint32_t>{1});
  CHECK(IsExcluded(*r, 1));
  CHECK_FALSE(IsExcluded(*r, 0));
  CHECK(table.Excluded(0, 1));
  // The late push is acknowledged and changes nothing.
  REQUIRE(table.Submit(key, 1, Dense({100, 200})).ok());
  CHECK(Values(*Result(table, key)) == std::vector<float>{11, 22});
}

TEST_CASE("Later phases of the round go on without the worker left out", "[round_deadline]") {
  Reducer reducer(2);
  PhaseTable table(Options(3, reducer, absl::Seconds(1)));
  REQUIRE(table.Submit({4, 0}, 0, Dense({1, 1}, false)).ok());
  REQUIRE(table.Submit({4, 0}, 1, Dense({2, 2}, false)).ok());
  REQUIRE(table.CloseExpired(absl::Now() + absl::Seconds(2)).size() == 1);
  // Phase 1 completes with the two others, at once, and still lists worker 2.
  REQUIRE(table.Submit({4, 1}, 0, Dense({3, 3})).ok());
  REQUIRE(table.Submit({4, 1}, 1, Dense({4, 4})).ok());
  const auto r = Result(table, {4, 1});
  CHECK(Values(*r) == std::vector<float>{7, 7});
  CHECK(r->excluded == std::vector<std::uint32_t>{2});
  // Worker 2's push of the later phase is acknowledged without a store (its spec is not compared).
  Contribution fetch = FetchOnly(true);
  CHECK(table.Submit({4, 1}, 2, fetch).ok());
  CHECK(Values(*Result(table, {4, 1})) == std::vector<float>{7, 7});
}

TEST_CASE("A deadline closes a phase only once half of the expected workers pushed", "[round_deadline]") {
  Reducer reducer(1);
  PhaseTable table(Options(4, reducer, absl::Milliseconds(10)));
  REQUIRE(table.Submit({0, 0}, 3, Dense({1})).ok());
  CHECK(table.CloseExpired(absl::Now() + absl::Seconds(5)).empty());  // 1 of 4
  REQUIRE(table.Submit({0, 0}, 1, Dense({2})).ok());
  const auto closed = table.CloseExpired(absl::Now() + absl::Seconds(5));  // 2 of 4
  REQUIRE(closed.size() == 1);
  CHECK(closed[0].left_out == std::vector<std::uint32_t>{0, 2});
  CHECK(Values(*Result(table, {0, 0})) == std::vector<float>{3});
}

TEST_CASE("Without a deadline, and for auxiliary phases waiting for on-time workers, nothing is closed early",
          "[round_deadline]") {
  Reducer reducer(1);
  PhaseTable none(Options(2, reducer, absl::ZeroDuration()));
  REQUIRE(none.Submit({0, 0}, 0, Dense({1})).ok());
  CHECK(none.CloseExpired(absl::Now() + absl::Hours(1)).empty());

  PhaseTable table(Options(2, reducer, absl::Milliseconds(1)));
  Contribution aux = Dense({1}, false);
  aux.spec.auxiliary = true;
  REQUIRE(table.Submit({0, 3}, 0, aux).ok());
  CHECK(table.CloseExpired(absl::Now() + absl::Hours(1)).empty());
  REQUIRE(table.Submit({0, 3}, 1, aux).ok());
  CHECK(Values(*Result(table, {0, 3})) == std::vector<float>{2});
}

namespace {

Contribution Aux(std::vector<float> v) {
  Contribution c = Dense(std::move(v), false);
  c.spec.auxiliary = true;
  return c;
}

}  // namespace

TEST_CASE("An auxiliary phase closes at its deadline without the workers its round left out", "[round_deadline]") {
  // Worker 2 died for good: the deadline leaves it out of round 0's scheme phase, and the auxiliary
  // sum of that round (evaluation counts) must not wait for it for ever.
  Reducer reducer(2);
  PhaseTable table(Options(3, reducer, absl::Seconds(1)));
  REQUIRE(table.Submit({0, 0}, 0, Dense({1, 1})).ok());
  REQUIRE(table.Submit({0, 0}, 1, Dense({2, 2})).ok());
  REQUIRE(table.CloseExpired(absl::Now() + absl::Seconds(2)).size() == 1);
  REQUIRE(table.Excluded(0, 2));
  const PhaseKey aux{0, kAuxPhase};
  REQUIRE(table.Submit(aux, 0, Aux({5, 1})).ok());
  REQUIRE(table.Submit(aux, 1, Aux({7, 1})).ok());
  CHECK(table.CloseExpired(absl::Now()).empty());  // not expired yet
  const auto closed = table.CloseExpired(absl::Now() + absl::Seconds(2));
  REQUIRE(closed.size() == 1);
  CHECK(closed[0].key == aux);
  CHECK(closed[0].auxiliary);
  CHECK(closed[0].left_out == std::vector<std::uint32_t>{2});
  const auto r = Result(table, aux);
  CHECK(Values(*r) == std::vector<float>{12, 2});  // the two others' sums
  CHECK(r->excluded == std::vector<std::uint32_t>{2});
  // A late sum from the left-out worker is acknowledged and changes nothing.
  REQUIRE(table.Submit(aux, 2, Aux({100, 1})).ok());
  CHECK(Values(*Result(table, aux)) == std::vector<float>{12, 2});
}

TEST_CASE("An auxiliary phase still waits for a left-out worker that sent its sums, and for on-time ones",
          "[round_deadline]") {
  Reducer reducer(1);
  PhaseTable table(Options(3, reducer, absl::Seconds(1)));
  REQUIRE(table.Submit({0, 0}, 0, Dense({1})).ok());
  REQUIRE(table.Submit({0, 0}, 1, Dense({2})).ok());
  REQUIRE(table.CloseExpired(absl::Now() + absl::Seconds(2)).size() == 1);  // worker 2 left out
  const PhaseKey aux{0, kAuxPhase};
  // The late worker 2 sends its sums; worker 1, on time in the round, has not: no deadline closes it.
  REQUIRE(table.Submit(aux, 0, Aux({1})).ok());
  REQUIRE(table.Submit(aux, 2, Aux({4})).ok());
  CHECK(table.CloseExpired(absl::Now() + absl::Hours(1)).empty());
  REQUIRE(table.Submit(aux, 1, Aux({2})).ok());
  const auto r = Result(table, aux);
  CHECK(Values(*r) == std::vector<float>{7});  // every member's sums, the late one's included
  CHECK(r->excluded.empty());
}

TEST_CASE("A worker left out keeps its gradient: its next round is one of the summed gradients",
          "[round_deadline][schemes]") {
  // Reference: a scheme never left out that gets g0 + g1 in one round. The scheme left out of the
  // round of g0 (state restored, g0 carried) must send the same payload in the round of g1 and end
  // in the same state.
  const std::uint64_t dim = 40;
  const auto kind = GENERATE(0, 1);  // top-k with error feedback (a residual), dense (no residual)
  auto make = [&](bool left_out) {
    auto ctx = Context(0, 2, dim, 5, left_out);
    return kind == 0 ? MakeTopKEfScheme(ctx) : MakeDenseScheme(ctx);
  };
  const auto g0 = Gradient(dim, 0.5f, 3.0f), g1 = Gradient(dim, -0.25f, 1.0f);
  std::vector<float> both(dim);
  for (std::uint64_t i = 0; i < dim; ++i) both[i] = g0[i] + g1[i];
  const auto warm = Gradient(dim, 1.0f, 0.0f);  // a first round both take part in: a residual to keep
  kernels::DeviceArray<float> d_warm(warm), d_g0(g0), d_g1(g1), d_both(both);

  auto late = make(true), reference = make(false);
  auto full_round = [](Scheme& s, std::uint64_t round, const float* g) {
    REQUIRE(s.BeginRound({round, 0.0}, g).ok());
    auto c = s.Contribute(0, nullptr);
    REQUIRE(c.ok());
    PhaseResult r{*c->payload, 1};
    REQUIRE(s.Finish(r).ok());
    return *c->payload;
  };
  full_round(*late, 0, d_warm.data());
  full_round(*reference, 0, d_warm.data());

  // Round 1: `late` contributes, then learns the round closed without it.
  REQUIRE(late->BeginRound({1, 0.0}, d_g0.data()).ok());
  auto sent = late->Contribute(0, nullptr);
  REQUIRE(sent.ok());
  const PhaseResult others{DenseValues{std::vector<float>(dim, 0.5f)}, 1, false, {0}};
  auto g = late->FinishExcluded(others);
  REQUIRE(g.ok());
  CHECK(std::get<DenseValues>(*g).values == std::vector<float>(dim, 0.5f));  // G_t as everyone applies it
  CHECK(late->selected() == 0);

  // Round 2: its payload equals the reference's for g0 + g1, and so does the state after it.
  const auto mine = full_round(*late, 2, d_g1.data());
  const auto theirs = full_round(*reference, 1, d_both.data());
  if (kind == 0) {
    CHECK(std::get<SparseVector>(mine).idx == std::get<SparseVector>(theirs).idx);
    CHECK(std::get<SparseVector>(mine).val == std::get<SparseVector>(theirs).val);
  } else {
    CHECK(std::get<DenseValues>(mine).values == std::get<DenseValues>(theirs).values);
  }
  CHECK(late->SaveState().arrays == reference->SaveState().arrays);
}

TEST_CASE("FinishExcluded needs a scheme told of the deadline", "[round_deadline][schemes]") {
  auto scheme = MakeTopKEfScheme(Context(0, 2, 8, 2, false));
  const std::vector<float> g(8, 1.0f);
  kernels::DeviceArray<float> d_g(g);
  REQUIRE(scheme->BeginRound({0, 0.0}, d_g.data()).ok());
  const PhaseResult r{SparseVector{8, {}, {}}, 1, false, {0}};
  CHECK(scheme->FinishExcluded(r).status().code() == absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("RunRound of a late worker fetches G_t, applies it like the others and keeps its gradient",
          "[round_deadline]") {
  const std::uint32_t workers = 3;
  const std::uint64_t dim = 64;
  Reducer reducer(dim);
  PhaseTable table(Options(workers, reducer, absl::Milliseconds(50)));
  std::atomic<bool> stop{false};
  std::thread ticker([&] {
    while (!stop.load()) {
      table.CloseExpired(absl::Now());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::vector<std::vector<float>> grads;
  std::vector<kernels::DeviceArray<float>> d_grads;
  std::vector<std::unique_ptr<Scheme>> schemes;
  for (std::uint32_t w = 0; w < workers; ++w) {
    grads.push_back(Gradient(dim, 0.1f * static_cast<float>(w + 1), static_cast<float>(w)));
    d_grads.emplace_back(grads.back());
    schemes.push_back(MakeTopKEfScheme(Context(w, workers, dim, 4, true)));
  }
  std::vector<absl::StatusOr<RoundOutcome>> outcomes(workers, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (std::uint32_t w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      if (w == 2) std::this_thread::sleep_for(std::chrono::milliseconds(400));  // the straggler
      TableAggregator aggregator(table, w, workers);
      outcomes[w] = RunRound(*schemes[w], aggregator, 0, RoundInfo{0, 0.0}, d_grads[w].data());
    });
  }
  for (auto& t : threads) t.join();
  stop.store(true);
  ticker.join();
  for (const auto& o : outcomes) REQUIRE(o.ok());
  CHECK_FALSE(outcomes[0]->left_out);
  CHECK_FALSE(outcomes[1]->left_out);
  CHECK(outcomes[2]->left_out);
  const auto& g = std::get<SparseVector>(outcomes[0]->aggregate);
  CHECK(g.idx == std::get<SparseVector>(outcomes[2]->aggregate).idx);  // everyone applies the same G_t
  CHECK(g.val == std::get<SparseVector>(outcomes[2]->aggregate).val);
  // G_t is the mean of the two on-time workers' top-k, nothing of the late one's.
  std::map<std::uint32_t, float> sum = NaiveTopK(grads[0], 4);
  for (const auto& [i, v] : NaiveTopK(grads[1], 4)) sum[i] += v;
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
  for (const auto& [i, v] : sum) {
    idx.push_back(i);
    val.push_back(v / 2.0f);
  }
  CHECK(g.idx == idx);
  CHECK(g.val == val);
  // The late worker's residual is as before the round (zero): the gradient it pushed is carried into
  // its next round instead (the carry test above pins that).
  CHECK(schemes[2]->SaveState().arrays.at("residual") == std::vector<float>(dim, 0.0f));
  CHECK(schemes[0]->SaveState().arrays.at("residual") != std::vector<float>(dim, 0.0f));
}
