// Heavy-hitter recovery by sampled threshold (see internal/sketch_recover.h). One Thrust source for
// the CPU (OpenMP) and CUDA backends.
#include "kernels/internal/sketch_recover.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <thrust/copy.h>
#include <thrust/fill.h>
#include <thrust/functional.h>
#include <thrust/gather.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

#include "common/splitmix.h"
#include "common/status.h"
#include "kernels/internal/scratch_array.h"
#include "kernels/internal/sketch_estimate.h"
#include "kernels/select.h"

namespace sketchps::kernels::internal {
namespace {

constexpr std::size_t kSample = std::size_t{1} << 15;
constexpr std::uint64_t kRecoverSampleSeed = 0x5EEDC0DEull;

struct SamplePosition {
  std::uint64_t n;
  SKETCHPS_HD std::uint32_t operator()(std::uint64_t s) const {
    return static_cast<std::uint32_t>(SplitMix64(kRecoverSampleSeed + s) % n);
  }
};
struct AbsOf {
  SKETCHPS_HD float operator()(float v) const { return fabsf(v); }
};

// Moves item slots [item·capacity, item·capacity + counts[item]) to out[offsets[item]...).
struct CompactSlots {
  const std::uint32_t* counts;
  const std::uint32_t* offsets;
  std::size_t capacity;
  const std::uint32_t* idx;
  const float* val;
  std::uint32_t* out_idx;
  float* out_val;
  SKETCHPS_HD void operator()(std::size_t item) const {
    for (std::uint32_t q = 0; q < counts[item]; ++q) {
      out_idx[offsets[item] + q] = idx[item * capacity + q];
      out_val[offsets[item] + q] = val[item * capacity + q];
    }
  }
};

// |estimate| of rank `rank` (0-based, descending) among the estimates of a sample of m coordinates.
absl::StatusOr<float> SampledThreshold(const float* d_table, const CountSketchHash& hash, std::size_t n, std::size_t m,
                                       std::size_t rank, const Exec& exec) {
  ScratchArray<std::uint32_t> pos(*exec.scratch, m);
  ScratchArray<float> est(*exec.scratch, m);
  thrust::counting_iterator<std::uint64_t> first(0);
  thrust::transform(Policy(exec), first, first + m, pos.data(), SamplePosition{n});
  EstimateInto(ListedIndices{pos.data()}, m, d_table, hash, StoreEstimates{est.data()}, exec);
  return SampledMagnitudeQuantile(est.data(), m, static_cast<double>(rank) / static_cast<double>(m), 0, 0, exec);
}

// Sorts `count` candidates by |estimate| (stable: index order among equals) and writes the first k.
void EmitTop(const std::uint32_t* d_idx, const float* d_val, std::size_t count, std::size_t k, std::uint32_t* d_out_idx,
             float* d_out_est, const Exec& exec) {
  ScratchArray<float> key(*exec.scratch, count);
  ScratchArray<std::uint32_t> order(*exec.scratch, count);
  thrust::transform(Policy(exec), d_val, d_val + count, key.data(), AbsOf{});
  thrust::sequence(Policy(exec), order.data(), order.data() + count);
  thrust::stable_sort_by_key(Policy(exec), key.data(), key.data() + count, order.data(), thrust::greater<float>());
  thrust::gather(Policy(exec), order.data(), order.data() + k, d_idx, d_out_idx);
  thrust::gather(Policy(exec), order.data(), order.data() + k, d_val, d_out_est);
}

// One estimation pass keeping |estimate| >= tau in `capacity` slots per work item, then the top k of
// those. Returns false (nothing written) when that would not be exact.
bool RecoverAbove(const float* d_table, const CountSketchHash& hash, std::size_t n, std::size_t k, float tau,
                  std::size_t capacity, std::uint32_t* d_out_idx, float* d_out_est, const Exec& exec,
                  const SketchBinning& binning) {
  const std::size_t items = EstimateItemCount(n, EstimateItemSize(hash, n, binning));
  ScratchArray<std::uint32_t> counts(*exec.scratch, items), offsets(*exec.scratch, items);
  ScratchArray<std::uint32_t> slot_idx(*exec.scratch, items * capacity);
  ScratchArray<float> slot_val(*exec.scratch, items * capacity);
  thrust::fill(Policy(exec), counts.data(), counts.data() + items, 0u);
  EstimateInto(AllIndices{}, n, d_table, hash,
               KeepAtLeast{tau, capacity, slot_idx.data(), slot_val.data(), counts.data()}, exec, binning);
  const std::uint32_t most =
      thrust::reduce(Policy(exec), counts.data(), counts.data() + items, 0u, thrust::maximum<std::uint32_t>());
  const std::size_t total = thrust::reduce(Policy(exec), counts.data(), counts.data() + items, std::uint64_t{0});
  if (most > capacity || total < k) return false;
  thrust::exclusive_scan(Policy(exec), counts.data(), counts.data() + items, offsets.data());
  ScratchArray<std::uint32_t> cand_idx(*exec.scratch, total);
  ScratchArray<float> cand_val(*exec.scratch, total);
  thrust::counting_iterator<std::size_t> first(0);
  thrust::for_each(Policy(exec), first, first + items,
                   CompactSlots{counts.data(), offsets.data(), capacity, slot_idx.data(), slot_val.data(),
                                cand_idx.data(), cand_val.data()});
  EmitTop(cand_idx.data(), cand_val.data(), total, k, d_out_idx, d_out_est, exec);
  return true;
}

#if SKETCHPS_KERNELS_CUDA
// Sort key of a candidate: |estimate| descending, then index ascending (one 64-bit radix key).
struct RankKey {
  SKETCHPS_HD std::uint64_t operator()(std::uint32_t i, float est) const {
    std::uint32_t bits = 0;
    const float a = fabsf(est);
    memcpy(&bits, &a, sizeof bits);
    return (std::uint64_t{0x7fffffffu - bits} << 32) | i;
  }
};
struct KeyIndex {
  SKETCHPS_HD std::uint32_t operator()(std::uint64_t key) const { return static_cast<std::uint32_t>(key); }
};

// The CUDA form of RecoverAbove: one walked estimation pass appends the coordinates at or above tau
// through an atomic counter (any order), then one radix sort by RankKey orders them.
bool RecoverAboveCuda(const float* d_table, const CountSketchHash& hash, std::size_t n, std::size_t k, float tau,
                      std::size_t capacity, std::uint32_t* d_out_idx, float* d_out_est, const Exec& exec) {
  ScratchArray<std::uint32_t> idx(*exec.scratch, capacity);
  ScratchArray<float> val(*exec.scratch, capacity);
  ScratchArray<unsigned long long> counter(*exec.scratch, 1);
  CudaCheck(cudaMemsetAsync(counter.data(), 0, sizeof(unsigned long long), static_cast<cudaStream_t>(exec.stream)),
            "recover counter");
  if (!EstimateRuns(d_table, hash, n, AppendAtLeast{tau, capacity, idx.data(), val.data(), counter.data()}, exec)) {
    return false;
  }
  unsigned long long total = 0;
  CopyToHost(&total, counter.data(), sizeof total);
  if (total > capacity || total < k) return false;
  ScratchArray<std::uint64_t> keys(*exec.scratch, total);
  thrust::transform(Policy(exec), idx.data(), idx.data() + total, val.data(), keys.data(), RankKey{});
  thrust::sort_by_key(Policy(exec), keys.data(), keys.data() + total, val.data());
  thrust::transform(Policy(exec), keys.data(), keys.data() + k, d_out_idx, KeyIndex{});
  thrust::copy(Policy(exec), val.data(), val.data() + k, d_out_est);
  return true;
}
#endif

}  // namespace

absl::StatusOr<std::size_t> RecoverTopK(const float* d_table, const CountSketchHash& hash, std::size_t n, std::size_t k,
                                        std::uint32_t* d_out_idx, float* d_out_est, const Exec& exec,
                                        const SketchBinning& binning) {
  const std::size_t m = std::min(n, kSample);
  const double expected = static_cast<double>(k) * static_cast<double>(m) / static_cast<double>(n);
  const auto rank = static_cast<std::size_t>(std::ceil(expected + 4.0 * std::sqrt(expected) + 8.0));
  // The sampled threshold needs a rank inside the sample: small ranges (n < about 4k + 13) take the
  // exact path below.
  if (k * 4 < n && rank < m) {
    SKETCHPS_ASSIGN_OR_RETURN(const float tau, SampledThreshold(d_table, hash, n, m, rank, exec));
    // Slots: four times the expected candidates of an item, plus slack for small items.
    const std::size_t item = EstimateItemSize(hash, n, binning);
    const double per_item = static_cast<double>(rank) / static_cast<double>(m) * static_cast<double>(item);
    const std::size_t capacity = std::min(item, static_cast<std::size_t>(4.0 * per_item) + 64);
#if SKETCHPS_KERNELS_CUDA
    const std::size_t slots = std::min(n, static_cast<std::size_t>(4.0 * static_cast<double>(rank) / m * n) + 1024);
    if (tau > 0.0f && RecoverAboveCuda(d_table, hash, n, k, tau, slots, d_out_idx, d_out_est, exec)) return k;
#else
    if (tau > 0.0f && RecoverAbove(d_table, hash, n, k, tau, capacity, d_out_idx, d_out_est, exec, binning)) return k;
#endif
  }
  ScratchArray<float> est(*exec.scratch, n);
  EstimateInto(AllIndices{}, n, d_table, hash, StoreEstimates{est.data()}, exec, binning);
  return TopK(est.data(), n, k, d_out_idx, d_out_est, exec);
}

}  // namespace sketchps::kernels::internal
