#include "sim/partition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/fashion_mnist.h"
#include "worker/rng.h"

namespace sketchps::sim {
namespace {

using worker::SplitMix64;

absl::Status BadPartition(const std::string& text, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--partition: '", text, "' ", why,
                                                 " (iid, dirichlet:ALPHA with ALPHA > 0 or inf, classes:K with K in "
                                                 "1, 2, 5)"));
}

// Uniform in (0, 1) with 53 bits: never 0, so logarithms and powers stay finite.
double Open01(SplitMix64& rng) { return (static_cast<double>(rng.Next() >> 11) + 0.5) * 0x1p-53; }

double StandardNormal(SplitMix64& rng) {
  const double u = Open01(rng), v = Open01(rng);
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * v);
}

// Gamma(shape, 1): Marsaglia and Tsang (2000); shapes below 1 by Gamma(shape + 1) * U^(1 / shape).
double Gamma(double shape, SplitMix64& rng) {
  if (shape < 1.0) return Gamma(shape + 1.0, rng) * std::pow(Open01(rng), 1.0 / shape);
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = StandardNormal(rng), v0 = 1.0 + c * x;
    if (v0 <= 0) continue;
    const double v = v0 * v0 * v0, u = Open01(rng);
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

// q ~ Dirichlet(alpha, ..., alpha) over `classes`; a draw whose every Gamma underflowed to 0 (tiny
// alpha) puts all mass on one class drawn uniformly, the limit of the distribution.
std::vector<double> Dirichlet(double alpha, std::uint32_t classes, SplitMix64& rng) {
  std::vector<double> q(classes);
  for (auto& v : q) v = Gamma(alpha, rng);
  const double sum = std::accumulate(q.begin(), q.end(), 0.0);
  if (!(sum > 0)) {
    std::fill(q.begin(), q.end(), 0.0);
    q[rng.Below(classes)] = 1.0;
    return q;
  }
  for (auto& v : q) v /= sum;
  return q;
}

// Each class's sample indices, in a seeded shuffle of the class (the data set's order permuted).
std::vector<std::vector<std::uint64_t>> ShuffledPools(std::span<const std::uint8_t> labels, std::uint32_t classes,
                                                      std::uint64_t seed) {
  std::vector<std::vector<std::uint64_t>> pools(classes);
  for (std::uint64_t i = 0; i < labels.size(); ++i) pools[labels[i]].push_back(i);
  for (std::uint32_t c = 0; c < classes; ++c) {
    const auto perm = worker::EpochPermutation(pools[c].size(), seed ^ 0x5109a1e5u, c);
    std::vector<std::uint64_t> shuffled(pools[c].size());
    for (std::size_t i = 0; i < perm.size(); ++i) shuffled[i] = pools[c][perm[i]];
    pools[c] = std::move(shuffled);
  }
  return pools;
}

// Splits each class's pool evenly over its holders, in worker order (holders[c]: the workers).
void SplitEvenly(const std::vector<std::vector<std::uint64_t>>& pools,
                 const std::vector<std::vector<std::uint32_t>>& holders, Partition& out) {
  for (std::size_t c = 0; c < pools.size(); ++c) {
    const std::uint64_t n = pools[c].size(), h = holders[c].size();
    for (std::uint64_t i = 0; i < h; ++i) {
      auto& mine = out.samples[holders[c][i]];
      mine.insert(mine.end(), pools[c].begin() + EvenBoundary(n, i, h), pools[c].begin() + EvenBoundary(n, i + 1, h));
    }
  }
}

// Worker w's `need` samples by its proportions q over the classes with samples left (see the header).
void FillBalanced(std::uint64_t need, const std::vector<double>& q, std::vector<std::vector<std::uint64_t>>& pools,
                  std::vector<std::uint64_t>& mine) {
  while (need > 0) {
    std::vector<double> w(pools.size(), 0.0);
    double mass = 0;
    for (std::size_t c = 0; c < pools.size(); ++c) {
      if (!pools[c].empty()) w[c] = q[c], mass += q[c];
    }
    if (!(mass > 0)) {  // its classes are gone: what is left, in proportion
      for (std::size_t c = 0; c < pools.size(); ++c) w[c] = static_cast<double>(pools[c].size());
    }
    const auto counts = LargestRemainder(need, w);
    for (std::size_t c = 0; c < pools.size(); ++c) {
      const std::uint64_t take = std::min<std::uint64_t>(counts[c], pools[c].size());
      mine.insert(mine.end(), pools[c].end() - take, pools[c].end());
      pools[c].resize(pools[c].size() - take);
      need -= take;
    }
  }
}

absl::StatusOr<Partition> DirichletPartition(std::span<const std::uint8_t> labels, std::uint32_t workers, double alpha,
                                             std::uint64_t seed, std::uint32_t classes) {
  auto pools = ShuffledPools(labels, classes, seed);
  Partition out;
  out.samples.resize(workers);
  if (std::isinf(alpha)) {
    std::vector<std::uint32_t> all(workers);
    std::iota(all.begin(), all.end(), 0u);
    SplitEvenly(pools, std::vector<std::vector<std::uint32_t>>(classes, all), out);
    return out;
  }
  SplitMix64 rng(seed * 0x9e3779b97f4a7c15ULL + 0xd1u);
  for (std::uint32_t w = 0; w < workers; ++w) out.proportions.push_back(Dirichlet(alpha, classes, rng));
  for (std::uint32_t w = 0; w < workers; ++w) {
    auto shard = worker::Shard(labels.size(), w, workers);
    if (!shard.ok()) return shard.status();
    FillBalanced(shard->size(), out.proportions[w], pools, out.samples[w]);
  }
  return out;
}

absl::StatusOr<Partition> ClassesPartition(std::span<const std::uint8_t> labels, std::uint32_t workers, std::uint32_t k,
                                           std::uint64_t seed, std::uint32_t classes) {
  if (classes % k != 0 || std::uint64_t{workers} * k < classes) {
    return absl::InvalidArgumentError(absl::StrCat("--partition: classes:", k, " needs workers x ", k, " >= ", classes,
                                                   " (every class held) and ", classes, " a multiple of ", k));
  }
  SplitMix64 rng(seed * 0x9e3779b97f4a7c15ULL + 0xc1u);
  std::vector<std::uint32_t> list;
  while (list.size() < std::uint64_t{workers} * k) {
    std::vector<std::uint32_t> perm(classes);
    std::iota(perm.begin(), perm.end(), 0u);
    for (std::uint32_t i = classes - 1; i > 0; --i) std::swap(perm[i], perm[rng.Below(i + 1)]);
    list.insert(list.end(), perm.begin(), perm.end());
  }
  std::vector<std::vector<std::uint32_t>> holders(classes);
  for (std::uint32_t w = 0; w < workers; ++w) {
    for (std::uint32_t j = 0; j < k; ++j) holders[list[w * k + j]].push_back(w);
  }
  Partition out;
  out.samples.resize(workers);
  SplitEvenly(ShuffledPools(labels, classes, seed), holders, out);
  return out;
}

}  // namespace

std::string PartitionSpec::Name() const {
  switch (kind) {
    case PartitionKind::kIid: return "iid";
    case PartitionKind::kDirichlet: return std::isinf(alpha) ? "dirichlet:inf" : absl::StrFormat("dirichlet:%g", alpha);
    case PartitionKind::kClasses: return absl::StrCat("classes:", classes_per_worker);
  }
  return "iid";
}

absl::StatusOr<PartitionSpec> ParsePartition(const std::string& text) {
  PartitionSpec spec;
  if (text == "iid") return spec;
  const auto colon = text.find(':');
  if (colon == std::string::npos) return BadPartition(text, "is not a partition");
  const std::string kind = text.substr(0, colon), arg = text.substr(colon + 1);
  if (kind == "dirichlet") {
    spec.kind = PartitionKind::kDirichlet;
    if (arg == "inf") {
      spec.alpha = std::numeric_limits<double>::infinity();
    } else if (!absl::SimpleAtod(arg, &spec.alpha) || !(spec.alpha > 0) || std::isinf(spec.alpha)) {
      return BadPartition(text, "has no alpha > 0");
    }
    return spec;
  }
  if (kind == "classes") {
    spec.kind = PartitionKind::kClasses;
    if (!absl::SimpleAtoi(arg, &spec.classes_per_worker) ||
        (spec.classes_per_worker != 1 && spec.classes_per_worker != 2 && spec.classes_per_worker != 5)) {
      return BadPartition(text, "has no K in 1, 2, 5");
    }
    return spec;
  }
  return BadPartition(text, "is not a partition");
}

absl::StatusOr<Partition> MakePartition(std::span<const std::uint8_t> labels, std::uint32_t workers,
                                        const PartitionSpec& spec, std::uint64_t seed, std::uint32_t classes) {
  if (spec.kind == PartitionKind::kIid) {
    return absl::InvalidArgumentError("--partition: iid has no static partition (the job's data order)");
  }
  if (workers == 0 || labels.size() < workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--partition: ", labels.size(), " samples cannot give each of ", workers, " workers one"));
  }
  for (std::uint64_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("--partition: label ", int{labels[i]}, " of sample ", i, " is not below ", classes, " classes"));
    }
  }
  if (spec.kind == PartitionKind::kDirichlet) return DirichletPartition(labels, workers, spec.alpha, seed, classes);
  return ClassesPartition(labels, workers, spec.classes_per_worker, seed, classes);
}

std::vector<std::uint64_t> LargestRemainder(std::uint64_t n, std::span<const double> weights) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<std::uint64_t> out(weights.size(), 0);
  std::vector<double> frac(weights.size(), 0.0);
  std::uint64_t given = 0;
  for (std::size_t c = 0; c < weights.size(); ++c) {
    const double quota = static_cast<double>(n) * weights[c] / total;
    out[c] = std::min<std::uint64_t>(static_cast<std::uint64_t>(std::floor(quota)), n - given);
    frac[c] = quota - std::floor(quota);
    given += out[c];
  }
  std::vector<std::size_t> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return frac[a] > frac[b]; });
  for (std::size_t i = 0; given < n; i = (i + 1) % order.size()) {
    if (weights[order[i]] > 0) ++out[order[i]], ++given;
  }
  return out;
}

std::uint64_t EvenBoundary(std::uint64_t n, std::uint64_t i, std::uint64_t parts) {
  return (2 * n * i + parts) / (2 * parts);
}

}  // namespace sketchps::sim
