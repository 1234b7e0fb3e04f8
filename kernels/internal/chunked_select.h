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

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

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

// max |v| over [begin, end), NaN ignored (a comparison, not fmaxf: that is a libm call on x86).
SKETCHPS_HD inline float BlockMaxMagnitude(const float* v, std::size_t begin, std::size_t end) {
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

// Writes the qualifying entries of v[begin, end) in index order from output position pos on,
// dropping those at positions >= limit. Blocks of kBlock entries whose maximum magnitude does not
// qualify are skipped after one (vectorizable) max.
template <bool kInclusive, std::size_t kBlock = kSelectBlock>
SKETCHPS_HD inline void WriteRangeAbove(const float* v, std::size_t begin, std::size_t end, float tau, std::size_t pos,
                                        std::size_t limit, std::uint32_t* out_idx, float* out_val) {
  for (std::size_t block = begin; block < end && pos < limit; block += kBlock) {
    const std::size_t block_end = end - block < kBlock ? end : block + kBlock;
    if (!Qualifies<kInclusive>(BlockMaxMagnitude(v, block, block_end), tau)) continue;
    for (std::size_t i = block; i < block_end && pos < limit; ++i) {
      const float x = v[i];
      if (Qualifies<kInclusive>(fabsf(x), tau)) {
        out_idx[pos] = static_cast<std::uint32_t>(i);
        out_val[pos] = x;
        ++pos;
      }
    }
  }
}

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
    WriteRangeAbove<kInclusive>(v, chunk.begin, chunk.begin + chunk.len, chunk.tau, offsets[c], limit, out_idx,
                                out_val);
  }
};

// Appends the chunks of [offset, offset + size), each at most kSelectChunk long, all with threshold
// tau (host side).
inline void AppendChunks(std::uint64_t offset, std::uint64_t size, float tau, std::vector<ChunkSpec>& chunks) {
  for (std::uint64_t b = offset; b < offset + size; b += kSelectChunk) {
    const auto len = static_cast<std::uint32_t>(std::min<std::uint64_t>(kSelectChunk, offset + size - b));
    chunks.push_back({b, len, tau});
  }
}

}  // namespace sketchps::kernels::internal
