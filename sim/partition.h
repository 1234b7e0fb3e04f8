// Data partitions for the simulator (sim/): which training samples each of P workers holds, the
// label skews federated and non-iid studies use. Torch-free; deterministic for a seed (the portable
// SplitMix64 of worker/rng.h, no std:: distribution), the same on every machine up to libm's last bit
// in the Dirichlet draws.
//
//   auto spec = ParsePartition("dirichlet:0.1");          // from --partition
//   auto part = MakePartition(labels, workers, *spec, seed);
//   part->samples[w]                                       // worker w's sample indices
//
// Kinds:
//   iid            no static partition: every worker draws its batches from the job's shuffled data
//                  order (worker/fashion_mnist.h's rule, sim/batch_source.h). MakePartition refuses it.
//   dirichlet:A    label skew of strength A > 0 with balanced sizes: worker w holds exactly
//                  |Shard(N, w, P)| samples (N/P within one), and its class proportions are drawn
//                  q_w ~ Dirichlet(A, ..., A) over the C classes. Workers are filled in order; worker
//                  w takes LargestRemainder(need, q_w restricted to the classes with samples left),
//                  capped by what is left, and repeats on the classes left until it holds its size.
//                  So worker 0's counts are LargestRemainder(n_0, q_0) exactly, and the last workers
//                  take the classes the others left over (the order bias every sequential fill has).
//                  Small A: each worker holds one or two classes; A = 0.5: a few; large A: all.
//   dirichlet:inf  the limit A -> infinity: each class c's n_c samples are split evenly over the
//                  workers, worker w taking round(n_c (w+1) / P) - round(n_c w / P) of them (round half
//                  up): every worker holds the data set's class proportions to within one sample per
//                  class.
//   classes:K      K labels per worker, K in {1, 2, 5} (divisors of C = 10, so that K consecutive
//                  entries of a shuffled class list never repeat a class): the class list is
//                  concatenated random permutations of the C classes, worker w holds entries
//                  [wK, wK + K). Class c's samples are split evenly over its H_c holders in worker
//                  order (the i-th holder takes round(n_c (i+1) / H_c) - round(n_c i / H_c)). Needs
//                  P K >= C so that every class has a holder.
// Every kind assigns every sample to exactly one worker. Within a class the samples taken are a
// seeded shuffle of the class, so a worker's samples are a random draw of its labels.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sketchps::sim {

enum class PartitionKind { kIid, kDirichlet, kClasses };

struct PartitionSpec {
  PartitionKind kind = PartitionKind::kIid;
  double alpha = 0;                      // kDirichlet: > 0, or infinity
  std::uint32_t classes_per_worker = 0;  // kClasses: 1, 2 or 5

  // "iid", "dirichlet:0.1", "dirichlet:inf", "classes:2": what ParsePartition reads.
  std::string Name() const;
};

// Reads --partition. InvalidArgument naming --partition and the accepted forms.
absl::StatusOr<PartitionSpec> ParsePartition(const std::string& text);

struct Partition {
  std::vector<std::vector<std::uint64_t>> samples;  // [worker] indices into the data set
  std::vector<std::vector<double>> proportions;     // [worker][class] the q_w drawn (kDirichlet, finite A)
};

// The partition of `labels` (each in [0, classes)) over `workers` workers. InvalidArgument when the
// spec is iid, when a label is out of range, when a worker would hold no sample (N < P), or, for
// classes:K, when P K < classes or classes is not a multiple of K.
absl::StatusOr<Partition> MakePartition(std::span<const std::uint8_t> labels, std::uint32_t workers,
                                        const PartitionSpec& spec, std::uint64_t seed, std::uint32_t classes = 10);

// Splits n into parts proportional to `weights` (non-negative, positive sum): floor of each quota,
// then the remaining units to the largest fractional parts, ties to the smaller index. Sums to n.
std::vector<std::uint64_t> LargestRemainder(std::uint64_t n, std::span<const double> weights);

// round(n * i / parts) with halves rounded up, in integers: the even split's i-th boundary.
std::uint64_t EvenBoundary(std::uint64_t n, std::uint64_t i, std::uint64_t parts);

}  // namespace sketchps::sim
