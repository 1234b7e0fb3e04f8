// Internal, CUDA backend only: deterministic reductions over a float array at memory bandwidth.
//
// DeviceSumFloats(d_x, n, term, exec) returns Σ term(x_i) for i < n, where term maps a float to
// the accumulator type (double, or a struct with operator+). The sum is taken in a fixed shape: a
// grid of min(kReduceBlocks, ⌈n/1024⌉) blocks of kReduceThreads threads, each thread a grid-stride
// loop over 16-byte loads (the array's unaligned head and its tail element by element), each block's
// partial by cub::BlockReduce, and the partials in index order by one block. The shape depends on n
// only, so the result is bitwise the same on every run and every CUDA device (Thrust's reductions
// pick their grid from the device). One read of the array, two launches and one 8-to-16-byte copy to
// the host, which waits for the stream; temporaries come from exec.scratch.
//
// Include only from kernels/*.cc (it pulls in cub); it is empty on the CPU backend.
#pragma once

#include "kernels/internal/policy.h"

#if SKETCHPS_KERNELS_CUDA
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <cub/block/block_reduce.cuh>

#include "kernels/internal/scratch_array.h"

namespace sketchps::kernels::internal {

constexpr int kReduceThreads = 256;
constexpr int kReduceBlocks = 1024;

struct PlainTerm {
  __host__ __device__ double operator()(float v) const { return static_cast<double>(v); }
};
struct AbsTerm {
  __host__ __device__ double operator()(float v) const { return static_cast<double>(fabsf(v)); }
};
struct SquareTerm {
  __host__ __device__ double operator()(float v) const { return static_cast<double>(v) * static_cast<double>(v); }
};
// 1 for NaN and ±Inf (exponent bits all ones, whatever the math flags), else 0.
struct NotFiniteTerm {
  __host__ __device__ double operator()(float v) const {
    std::uint32_t bits = 0;
    memcpy(&bits, &v, sizeof bits);
    return (bits & 0x7f800000u) == 0x7f800000u ? 1.0 : 0.0;
  }
};

struct SumOp {
  template <class T>
  __host__ __device__ T operator()(const T& a, const T& b) const {
    return a + b;
  }
};

// Block b's partial: elements [0, head) and [head + 4·vecs, n) one by one, the rest as float4.
template <class Acc, class Term>
__global__ void ReducePartials(const float* x, std::size_t head, std::size_t vecs, std::size_t n, Term term,
                               Acc* partials) {
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  Acc acc{};
  const auto* v4 = reinterpret_cast<const float4*>(x + head);
  for (std::size_t i = tid; i < vecs; i += stride) {
    const float4 v = v4[i];
    acc = acc + term(v.x);
    acc = acc + term(v.y);
    acc = acc + term(v.z);
    acc = acc + term(v.w);
  }
  const std::size_t rest = n - 4 * vecs;  // head + tail elements
  for (std::size_t r = tid; r < rest; r += stride) {
    const std::size_t i = r < head ? r : r - head + head + 4 * vecs;
    acc = acc + term(x[i]);
  }
  using Reduce = cub::BlockReduce<Acc, kReduceThreads>;
  __shared__ typename Reduce::TempStorage storage;
  const Acc block = Reduce(storage).Reduce(acc, SumOp{});
  if (threadIdx.x == 0) partials[blockIdx.x] = block;
}

template <class Acc>
__global__ void ReduceFinal(const Acc* partials, int count, Acc* out) {
  Acc acc{};
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc = acc + partials[i];
  using Reduce = cub::BlockReduce<Acc, kReduceThreads>;
  __shared__ typename Reduce::TempStorage storage;
  const Acc total = Reduce(storage).Reduce(acc, SumOp{});
  if (threadIdx.x == 0) *out = total;
}

// Blocks of the fixed reduction shape for n elements.
inline int ReduceGrid(std::size_t n) {
  const std::size_t want = (n + 1023) / 1024;
  return static_cast<int>(want < kReduceBlocks ? want : kReduceBlocks);
}

// After a partials kernel was queued: queues the sum of partials[0, blocks) into partials[blocks].
template <class Acc>
void QueueFinal(ScratchArray<Acc>& partials, int blocks, cudaStream_t stream) {
  CudaCheck(cudaGetLastError(), "reduction kernel launch");
  ReduceFinal<Acc><<<1, kReduceThreads, 0, stream>>>(partials.data(), blocks, partials.data() + blocks);
  CudaCheck(cudaGetLastError(), "reduction kernel launch");
}

// Waits for the stream and returns the queued result partials[blocks].
template <class Acc>
Acc ReadResult(ScratchArray<Acc>& partials, int blocks, cudaStream_t stream) {
  Acc result{};
  CudaCheck(cudaMemcpyAsync(&result, partials.data() + blocks, sizeof(Acc), cudaMemcpyDeviceToHost, stream),
            "reduction result copy");
  CudaCheck(cudaStreamSynchronize(stream), "reduction");
  return result;
}

// After a partials kernel was queued: sums partials[0, blocks) into partials[blocks] and returns it.
template <class Acc>
Acc FinishReduce(ScratchArray<Acc>& partials, int blocks, cudaStream_t stream) {
  QueueFinal(partials, blocks, stream);
  return ReadResult(partials, blocks, stream);
}

// Queues the whole reduction of n > 0 floats, without reading the result: the sum lands in device
// memory at partials[ReduceGrid(n)] (partials holds ReduceGrid(n) + 1 values). Returns the grid.
template <class Term, class Acc>
int QueueSumFloats(const float* d_x, std::size_t n, Term term, ScratchArray<Acc>& partials, cudaStream_t stream) {
  const std::size_t misalign = (reinterpret_cast<std::uintptr_t>(d_x) % 16) / sizeof(float);
  const std::size_t head = misalign == 0 ? 0 : (n < 4 - misalign ? n : 4 - misalign);
  const std::size_t vecs = (n - head) / 4;
  const int blocks = ReduceGrid(n);
  ReducePartials<Acc><<<blocks, kReduceThreads, 0, stream>>>(d_x, head, vecs, n, term, partials.data());
  QueueFinal(partials, blocks, stream);
  return blocks;
}

template <class Term>
auto DeviceSumFloats(const float* d_x, std::size_t n, Term term, const Exec& exec) -> decltype(term(0.0f)) {
  using Acc = decltype(term(0.0f));
  if (n == 0) return Acc{};
  const auto stream = static_cast<cudaStream_t>(exec.stream);
  ScratchArray<Acc> partials(*exec.scratch, static_cast<std::size_t>(ReduceGrid(n)) + 1);
  const int blocks = QueueSumFloats(d_x, n, term, partials, stream);
  return ReadResult(partials, blocks, stream);
}

// Σ term(i) for i < n (term: std::size_t -> Acc), in the same fixed shape as DeviceSumFloats but one
// index at a time: for terms that read by index (counts of entries above per-segment thresholds).
template <class Acc, class Term>
__global__ void ReduceIndexPartials(std::size_t n, Term term, Acc* partials) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  Acc acc{};
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    acc = acc + term(i);
  }
  using Reduce = cub::BlockReduce<Acc, kReduceThreads>;
  __shared__ typename Reduce::TempStorage storage;
  const Acc block = Reduce(storage).Reduce(acc, SumOp{});
  if (threadIdx.x == 0) partials[blockIdx.x] = block;
}

template <class Term>
auto DeviceSumIndices(std::size_t n, Term term, const Exec& exec) -> decltype(term(std::size_t{0})) {
  using Acc = decltype(term(std::size_t{0}));
  if (n == 0) return Acc{};
  const auto stream = static_cast<cudaStream_t>(exec.stream);
  const int blocks = ReduceGrid(n);
  ScratchArray<Acc> partials(*exec.scratch, static_cast<std::size_t>(blocks) + 1);
  ReduceIndexPartials<Acc><<<blocks, kReduceThreads, 0, stream>>>(n, term, partials.data());
  return FinishReduce(partials, blocks, stream);
}

}  // namespace sketchps::kernels::internal
#endif  // SKETCHPS_KERNELS_CUDA
