// Internal, CPU backend only: the large-table Count Sketch loops (binned accumulation, rows-outer
// estimation; internal/sketch_binning.h says why and what they guarantee), and the per-row batch
// hasher they share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/internal/poly_lanes.h"
#include "kernels/internal/sketch_binning.h"
#include "kernels/internal/sketch_cursor.h"

#if !SKETCHPS_KERNELS_CUDA
namespace sketchps::kernels::internal {

constexpr std::uint32_t kSignBit = 0x80000000u;

// Row j's hashes of consecutive entries of `in`, a batch at a time: Next(m, bucket, sign_bit) hashes
// the next m <= kHashBatch entries t (coordinate in.Index(t)) into bucket[q] = h_j(i) and
// sign_bit[q] = 0 when s_j(i) = +1, kSignBit otherwise. Only the last batch may have m % 8 != 0.
// Contiguous kPolynomial61 inputs are hashed in SIMD lanes (scalar for a ragged tail), the rest by
// a Cursor. (A batch interface rather than a callback: the caller's loop keeps its state in
// registers.)
constexpr std::size_t kHashBatch = 256;

template <class Family, class Input, bool = std::is_same_v<Family, PolyFamily>&& Contiguous<Input>::value>
class RowHasher {
 public:
  RowHasher(const CountSketchHash& hash, std::uint32_t j, const Input& in, std::size_t lo)
      : cursor_(hash, j, in, lo), t_(lo) {}
  void Next(std::size_t m, std::uint32_t* bucket, std::uint32_t* sign_bit) {
    for (std::size_t q = 0; q < m; ++q, ++t_, cursor_.Next()) {
      bucket[q] = cursor_.Bucket(t_);
      sign_bit[q] = cursor_.Positive(t_) ? 0u : kSignBit;
    }
  }

 private:
  Cursor<Family, Input> cursor_;
  std::size_t t_;
};

template <class Family, class Input>
class RowHasher<Family, Input, true> {
 public:
  RowHasher(const CountSketchHash& hash, std::uint32_t j, const Input&, std::size_t lo)
      : row_(hash.PolyRow(j)), lanes_(StartPolyLanes(row_, static_cast<std::uint32_t>(lo))), t_(lo) {}
  void Next(std::size_t m, std::uint32_t* bucket, std::uint32_t* sign_bit) {
    const std::size_t whole = m / kPolyLanes * kPolyLanes;
    if (whole > 0) WalkPolyLanes(lanes_, whole / kPolyLanes, bucket, sign_bit);
    for (std::size_t q = whole; q < m; ++q) {
      const auto i = static_cast<std::uint32_t>(t_ + q);
      bucket[q] = row_.Bucket(i);
      sign_bit[q] = row_.Positive(i) ? 0u : kSignBit;
    }
    t_ += m;
  }

 private:
  CountSketchPolyRow row_;
  PolyLanes lanes_;
  std::size_t t_;
};

inline float FloatBits(std::uint32_t bits) {
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
inline std::uint32_t BitsOf(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

// One pending update of a bin: row[col] += value.
struct BinRecord {
  std::uint32_t col;
  float value;
};

// Appends rec to list b of `lists` (capacity records each, fill[b] used). Returns the list when it
// is now full (and empties it), else nullptr.
inline BinRecord* AppendRecord(BinRecord* lists, std::uint32_t* fill, std::uint32_t b, std::uint32_t capacity,
                               BinRecord rec) {
  BinRecord* list = lists + std::size_t{b} * capacity;
  std::uint32_t n = fill[b];
  list[n] = rec;
  if (++n == capacity) {
    fill[b] = 0;
    return list;
  }
  fill[b] = n;
  return nullptr;
}

inline void AddRecords(const BinRecord* list, std::size_t count, float* row) {
  for (std::size_t q = 0; q < count; ++q) row[list[q].col] += list[q].value;
}

// out (rows × cols) += S(entries [lo, hi) of src), binned by `plan`: chunks of `chunk` entries are
// swept once per row (the chunk stays in cache), each entry appended to its bin's list, a full list
// added to the row at once, and at the end of the chunk's row every list in bin order. lists holds
// bins·capacity records and fill PaddedCounters(bins) counters (this work item's).
template <class Family, class Source>
void BinnedAccumulate(const Source& src, std::size_t lo, std::size_t hi, std::size_t chunk, const CountSketchHash& hash,
                      const BinPlan& plan, float* out, BinRecord* lists, std::uint32_t* fill) {
  // Zero entries as the direct loop treats them: PolyLanesAccumulate adds them (±0 leaves every
  // cell but −0 unchanged), the generic loop skips them.
  constexpr bool kSkipZeros = !(std::is_same_v<Family, PolyFamily> && std::is_same_v<Source, DenseSource>);
  const std::uint32_t bins = plan.bins, shift = plan.shift;
  const auto capacity = static_cast<std::uint32_t>(plan.capacity);
  std::uint32_t bucket[kHashBatch];
  std::uint32_t sign_bit[kHashBatch];
  for (std::uint32_t b = 0; b < bins; ++b) fill[b] = 0;
  for (std::size_t base = lo; base < hi; base += chunk) {
    const std::size_t end = hi - base < chunk ? hi : base + chunk;
    for (std::uint32_t j = 0; j < hash.rows(); ++j) {
      float* row = out + j * std::size_t{hash.cols()};
      RowHasher<Family, Source> hasher(hash, j, src, base);
      for (std::size_t t0 = base; t0 < end; t0 += kHashBatch) {
        const std::size_t m = end - t0 < kHashBatch ? end - t0 : kHashBatch;
        hasher.Next(m, bucket, sign_bit);
        for (std::size_t q = 0; q < m; ++q) {
          const float v = src.Value(t0 + q);
          if (kSkipZeros && v == 0.0f) continue;
          const BinRecord rec{bucket[q], FloatBits(BitsOf(v) ^ sign_bit[q])};
          if (const BinRecord* full = AppendRecord(lists, fill, bucket[q] >> shift, capacity, rec)) {
            AddRecords(full, capacity, row);
          }
        }
      }
      for (std::uint32_t b = 0; b < bins; ++b) {
        AddRecords(lists + std::size_t{b} * capacity, fill[b], row);
        fill[b] = 0;
      }
    }
  }
}

// Rows-outer estimation of coordinates [0, count) (AllIndices), `item` coordinates at a time, the
// items split evenly over `parts` Thrust work items (one per thread); per part, `vals` holds
// rows·item floats. Calls the sink as EstimateItems does: sink(item index, t0, est, m) in increasing
// t0 within an item, m <= kBlock.
template <class Family, class Sink, std::size_t kBlock>
struct RowsOuterEstimate {
  std::size_t count;
  std::size_t parts;
  std::size_t item;
  const float* table;
  CountSketchHash hash;
  Sink sink;
  float* vals;

  void operator()(std::size_t part) const {
    const std::size_t items = (count + item - 1) / item;
    float* item_vals = vals + part * hash.rows() * item;
    float est[kBlock];
    for (std::size_t it = items * part / parts; it < items * (part + 1) / parts; ++it) {
      const std::size_t lo = it * item;
      const std::size_t m = count - lo < item ? count - lo : item;
      for (std::uint32_t j = 0; j < hash.rows(); ++j) RowValues(j, lo, m, item_vals + j * item);
      for (std::size_t t0 = 0; t0 < m; t0 += kBlock) {
        const std::size_t mm = m - t0 < kBlock ? m - t0 : kBlock;
        StridedMedians(item_vals + t0, item, hash.rows(), mm, est);
        sink(it, lo + t0, est, mm);
      }
    }
  }

  // out[t] = s_j(i)·T[j][h_j(i)] for i = lo + t, t < m.
  void RowValues(std::uint32_t j, std::size_t lo, std::size_t m, float* out) const {
    const float* row = table + j * std::size_t{hash.cols()};
    std::uint32_t bucket[kHashBatch];
    std::uint32_t sign_bit[kHashBatch];
    RowHasher<Family, AllIndices> hasher(hash, j, AllIndices{}, lo);
    for (std::size_t t0 = 0; t0 < m; t0 += kHashBatch) {
      const std::size_t mm = m - t0 < kHashBatch ? m - t0 : kHashBatch;
      hasher.Next(mm, bucket, sign_bit);
      for (std::size_t q = 0; q < mm; ++q) out[t0 + q] = FloatBits(BitsOf(row[bucket[q]]) ^ sign_bit[q]);
    }
  }
};

}  // namespace sketchps::kernels::internal
#endif  // !SKETCHPS_KERNELS_CUDA
