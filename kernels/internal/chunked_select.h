// Internal to kernels/*.cc: compaction by magnitude threshold in two passes over chunks, instead of
// Thrust's copy_if (which on the OpenMP backend is flags + scan + scatter with two n-sized
// temporaries). Pass 1 counts the qualifying entries of every chunk; an exclusive scan of the counts
// gives each chunk's output offset; pass 2 writes each chunk's entries in index order, skipping
// blocks whose maximum magnitude is below the threshold (the common case at low density).
//
// A chunk is a contiguous run [begin, begin + len) with its own threshold, so per-layer thresholds
// (SDAGC) are just chunks that never cross a layer boundary. kInclusive selects |x| >= tau, else
// |x| > tau. NaN never qualifies.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/hd.h"
#include "kernels/internal/policy.h"

namespace sketchps::kernels::internal {

// Long sequential runs suit CPU threads; short ones give the GPU enough chunks.
#if SKETCHPS_KERNELS_CUDA
constexpr std::size_t kSelectChunk = 256;
#else
constexpr std::size_t kSelectChunk = std::size_t{1} << 14;
#endif
constexpr std::size_t kSelectBlock = 64;

struct ChunkSpec {
  std::uint64_t begin;
  std::uint32_t len;
  float tau;
};

template <bool kInclusive>
SKETCHPS_HD inline bool Qualifies(float magnitude, float tau) {
  return kInclusive ? magnitude >= tau : magnitude > tau;
}

template <bool kInclusive>
struct CountChunkAbove {
  const float* v;
  const ChunkSpec* chunks;
  SKETCHPS_HD std::uint32_t operator()(std::size_t c) const {
    const ChunkSpec chunk = chunks[c];
    const float* x = v + chunk.begin;  // locals and an int index let the host compiler vectorize
    const int len = static_cast<int>(chunk.len);
    const float tau = chunk.tau;
    int count = 0;
#if !SKETCHPS_KERNELS_CUDA
#pragma omp simd reduction(+ : count)
#endif
    for (int i = 0; i < len; ++i) count += Qualifies<kInclusive>(fabsf(x[i]), tau) ? 1 : 0;
    return static_cast<std::uint32_t>(count);
  }
};

// Writes chunk c's qualifying entries from offsets[c] on, dropping those at positions >= limit.
template <bool kInclusive>
struct WriteChunkAbove {
  const float* v;
  const ChunkSpec* chunks;
  const std::uint32_t* offsets;
  std::size_t limit;
  std::uint32_t* out_idx;
  float* out_val;
  SKETCHPS_HD void operator()(std::size_t c) const {
    const ChunkSpec chunk = chunks[c];
    const std::size_t end = chunk.begin + chunk.len;
    std::size_t pos = offsets[c];
    for (std::size_t block = chunk.begin; block < end && pos < limit; block += kSelectBlock) {
      const std::size_t block_end = end - block < kSelectBlock ? end : block + kSelectBlock;
      if (!Qualifies<kInclusive>(BlockMax(block, block_end), chunk.tau)) continue;
      for (std::size_t i = block; i < block_end && pos < limit; ++i) {
        const float x = v[i];
        if (Qualifies<kInclusive>(fabsf(x), chunk.tau)) {
          out_idx[pos] = static_cast<std::uint32_t>(i);
          out_val[pos] = x;
          ++pos;
        }
      }
    }
  }
  // max |v| over [begin, end), NaN ignored (a comparison, not fmaxf: that is a libm call on x86).
  SKETCHPS_HD float BlockMax(std::size_t begin, std::size_t end) const {
    const float* x = v + begin;
    const int len = static_cast<int>(end - begin);
    float m = 0.0f;
#if !SKETCHPS_KERNELS_CUDA
#pragma omp simd reduction(max : m)
#endif
    for (int i = 0; i < len; ++i) {
      const float a = fabsf(x[i]);
      m = a > m ? a : m;
    }
    return m;
  }
};

}  // namespace sketchps::kernels::internal
