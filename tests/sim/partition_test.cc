// The simulator's data partitions (sim/partition.h) against their closed forms: every sample held
// exactly once; dirichlet:inf splits each class evenly (round-half-up boundaries); classes:K gives
// each worker exactly K labels and each holder its even share; dirichlet:A gives balanced sizes, worker
// 0 the largest-remainder counts of its drawn proportions, and a skew that grows as A shrinks.
// Participation draws (sim/participation.h): sizes, distinct sorted workers, determinism, coverage.
#include "sim/partition.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include "sim/participation.h"

using namespace sketchps::sim;

namespace {

// Labels with unequal classes: class c has 100 + 37 c samples, interleaved (c = i mod 10 while any left).
std::vector<std::uint8_t> Labels() {
  std::vector<std::uint64_t> left(10);
  for (int c = 0; c < 10; ++c) left[c] = 100 + 37 * c;
  std::vector<std::uint8_t> labels;
  for (bool any = true; any;) {
    any = false;
    for (int c = 0; c < 10; ++c) {
      if (left[c] == 0) continue;
      labels.push_back(static_cast<std::uint8_t>(c));
      --left[c];
      any = true;
    }
  }
  return labels;
}

std::vector<std::uint64_t> ClassSizes(const std::vector<std::uint8_t>& labels) {
  std::vector<std::uint64_t> n(10, 0);
  for (auto l : labels) ++n[l];
  return n;
}

// counts[w][c]: the samples of class c worker w holds.
std::vector<std::vector<std::uint64_t>> Counts(const Partition& p, const std::vector<std::uint8_t>& labels) {
  std::vector<std::vector<std::uint64_t>> counts(p.samples.size(), std::vector<std::uint64_t>(10, 0));
  for (std::size_t w = 0; w < p.samples.size(); ++w) {
    for (auto i : p.samples[w]) ++counts[w][labels[i]];
  }
  return counts;
}

void RequireEverySampleOnce(const Partition& p, std::size_t n) {
  std::vector<int> seen(n, 0);
  for (const auto& mine : p.samples) {
    for (auto i : mine) {
      REQUIRE(i < n);
      ++seen[i];
    }
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
}

Partition Make(const std::vector<std::uint8_t>& labels, std::uint32_t workers, const std::string& spec,
               std::uint64_t seed = 1) {
  auto s = ParsePartition(spec);
  REQUIRE(s.ok());
  auto p = MakePartition(labels, workers, *s, seed);
  REQUIRE(p.ok());
  return *std::move(p);
}

}  // namespace

TEST_CASE("dirichlet:inf splits every class evenly over the workers", "[sim][partition]") {
  const auto labels = Labels();
  const auto n = ClassSizes(labels);
  const std::uint32_t workers = GENERATE(1u, 3u, 7u, 64u);
  const Partition p = Make(labels, workers, "dirichlet:inf");
  RequireEverySampleOnce(p, labels.size());
  const auto counts = Counts(p, labels);
  for (std::uint32_t w = 0; w < workers; ++w) {
    for (int c = 0; c < 10; ++c) {
      // round(n_c (w+1) / P) - round(n_c w / P), written out in doubles (halves up).
      const double hi = std::floor(static_cast<double>(n[c]) * (w + 1) / workers + 0.5);
      const double lo = std::floor(static_cast<double>(n[c]) * w / workers + 0.5);
      CHECK(counts[w][c] == static_cast<std::uint64_t>(hi - lo));
      CHECK(std::fabs(static_cast<double>(counts[w][c]) - static_cast<double>(n[c]) / workers) <= 1.0);
    }
  }
}

TEST_CASE("classes:K gives each worker exactly K labels and each holder its even share", "[sim][partition]") {
  const auto labels = Labels();
  const auto n = ClassSizes(labels);
  const std::uint32_t k = GENERATE(1u, 2u, 5u);
  const std::uint32_t workers = GENERATE(10u, 13u, 40u);
  const Partition p = Make(labels, workers, "classes:" + std::to_string(k));
  RequireEverySampleOnce(p, labels.size());
  const auto counts = Counts(p, labels);
  std::vector<std::vector<std::uint32_t>> holders(10);
  for (std::uint32_t w = 0; w < workers; ++w) {
    std::uint32_t held = 0;
    for (int c = 0; c < 10; ++c) {
      if (counts[w][c] > 0) {
        ++held;
        holders[c].push_back(w);
      }
    }
    CHECK(held == k);
  }
  for (int c = 0; c < 10; ++c) {
    REQUIRE_FALSE(holders[c].empty());
    const double h = static_cast<double>(holders[c].size());
    for (std::size_t i = 0; i < holders[c].size(); ++i) {
      const double hi = std::floor(static_cast<double>(n[c]) * static_cast<double>(i + 1) / h + 0.5);
      const double lo = std::floor(static_cast<double>(n[c]) * static_cast<double>(i) / h + 0.5);
      CHECK(counts[holders[c][i]][c] == static_cast<std::uint64_t>(hi - lo));
    }
  }
}

TEST_CASE("dirichlet:A balances sizes, follows the drawn proportions and skews more as A shrinks", "[sim][partition]") {
  const auto labels = Labels();
  const std::uint32_t workers = 40;    // 67 samples each, fewer than the smallest class holds
  std::map<double, double> top_share;  // alpha -> mean share of a worker's largest class
  for (double alpha : {0.1, 0.5, 100.0}) {
    const Partition p = Make(labels, workers, "dirichlet:" + std::to_string(alpha));
    RequireEverySampleOnce(p, labels.size());
    const auto counts = Counts(p, labels);
    REQUIRE(p.proportions.size() == workers);
    double share = 0;
    for (std::uint32_t w = 0; w < workers; ++w) {
      const std::uint64_t size = p.samples[w].size();
      // Balanced: Shard(N, w, P)'s size, N / P within one.
      CHECK(size == labels.size() / workers + (w < labels.size() % workers ? 1 : 0));
      share += static_cast<double>(*std::max_element(counts[w].begin(), counts[w].end())) / size;
      double q = 0;
      for (double v : p.proportions[w]) q += v;
      CHECK(q == Approx(1.0));
    }
    // Worker 0 takes before any class runs out: exactly the largest remainder of its proportions.
    CHECK(counts[0] == LargestRemainder(p.samples[0].size(), p.proportions[0]));
    top_share[alpha] = share / workers;
  }
  CHECK(top_share[0.1] > 0.6);
  CHECK(top_share[0.1] > top_share[0.5]);
  CHECK(top_share[0.5] > top_share[100.0]);
  CHECK(top_share[100.0] < 0.25);  // near the data set's 15% largest class
}

TEST_CASE("Partitions are deterministic for a seed and differ between seeds", "[sim][partition]") {
  const auto labels = Labels();
  for (const char* spec : {"dirichlet:0.5", "classes:2"}) {
    INFO(spec);
    CHECK(Make(labels, 16, spec, 5).samples == Make(labels, 16, spec, 5).samples);
    CHECK(Make(labels, 16, spec, 5).samples != Make(labels, 16, spec, 6).samples);
  }
}

TEST_CASE("Bad partitions are refused naming --partition", "[sim][partition]") {
  for (const char* text :
       {"", "dirichlet", "dirichlet:0", "dirichlet:-1", "dirichlet:x", "classes:3", "classes:10", "skew:2"}) {
    auto s = ParsePartition(text);
    INFO(text);
    REQUIRE_FALSE(s.ok());
    CHECK(std::string(s.status().message()).find("--partition") == 0);
  }
  const auto labels = Labels();
  CHECK_FALSE(MakePartition(labels, 4, *ParsePartition("classes:2"), 1).ok());  // 4 x 2 < 10 classes
  CHECK_FALSE(MakePartition(labels, 4, *ParsePartition("iid"), 1).ok());
  CHECK(ParsePartition("dirichlet:inf")->Name() == "dirichlet:inf");
  CHECK(ParsePartition("dirichlet:0.1")->Name() == "dirichlet:0.1");
  CHECK(ParsePartition("classes:1")->Name() == "classes:1");
}

TEST_CASE("LargestRemainder and EvenBoundary", "[sim][partition]") {
  const std::vector<double> w{0.5, 0.3, 0.2};
  CHECK(LargestRemainder(10, w) == std::vector<std::uint64_t>{5, 3, 2});
  CHECK(LargestRemainder(7, w) == std::vector<std::uint64_t>{4, 2, 1});  // quotas 3.5, 2.1, 1.4
  CHECK(LargestRemainder(3, std::vector<double>{1, 1, 1, 0}) == std::vector<std::uint64_t>{1, 1, 1, 0});
  CHECK(LargestRemainder(2, std::vector<double>{1, 1, 1}) == std::vector<std::uint64_t>{1, 1, 0});  // ties: lower
  CHECK(EvenBoundary(10, 1, 4) == 3);                                                               // 2.5 rounds up
  CHECK(EvenBoundary(10, 4, 4) == 10);
  CHECK(EvenBoundary(7, 1, 3) == 2);  // 2.33
}

TEST_CASE("Participation draws m = round(f P) distinct workers per round, the same for a seed",
          "[sim][participation]") {
  CHECK(ParticipantsPerRound(256, 0.1) == 26);
  CHECK(ParticipantsPerRound(64, 0.1) == 6);
  CHECK(ParticipantsPerRound(4, 0.1) == 1);
  CHECK(ParticipantsPerRound(16, 1.0) == 16);
  CHECK(Participants(8, 1.0, 3, 5) == std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5, 6, 7});
  std::vector<int> times(64, 0);
  for (std::uint64_t r = 0; r < 400; ++r) {
    const auto who = Participants(64, 0.25, 9, r);
    REQUIRE(who.size() == 16);
    CHECK(std::is_sorted(who.begin(), who.end()));
    CHECK(std::set<std::uint32_t>(who.begin(), who.end()).size() == 16);
    CHECK(who == Participants(64, 0.25, 9, r));
    for (auto w : who) ++times[w];
  }
  CHECK(Participants(64, 0.25, 9, 0) != Participants(64, 0.25, 9, 1));
  CHECK(Participants(64, 0.25, 9, 0) != Participants(64, 0.25, 10, 0));
  // Each worker is drawn 100 times in expectation (sd about 8.7).
  CHECK(*std::min_element(times.begin(), times.end()) > 60);
  CHECK(*std::max_element(times.begin(), times.end()) < 140);
  CHECK_FALSE(CheckParticipation(0).ok());
  CHECK_FALSE(CheckParticipation(1.5).ok());
  CHECK(CheckParticipation(0.1).ok());
}
