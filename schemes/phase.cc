#include "schemes/phase.h"

#include "common/overloaded.h"

namespace sketchps {

const char* ReductionName(Reduction r) {
  switch (r) {
    case Reduction::kDenseSum: return "dense_sum";
    case Reduction::kSparseSum: return "sparse_sum";
    case Reduction::kSketchRecover: return "sketch_recover";
    case Reduction::kLeaderIndexSet: return "leader_index_set";
  }
  return "unknown";
}

const char* PayloadKindName(const PayloadValue& payload) {
  return std::visit(Overloaded{[](const DenseValues&) { return "dense"; },
                               [](const SparseVector&) { return "sparse"; },
                               [](const SketchTable&) { return "sketch"; },
                               [](const IndexSet&) { return "index_set"; }},
                    payload);
}

std::uint64_t RawPayloadBytes(const PayloadValue& payload) {
  return std::visit(Overloaded{[](const DenseValues& p) -> std::uint64_t { return p.values.size() * 4; },
                               [](const SparseVector& p) -> std::uint64_t { return p.idx.size() * 8; },
                               [](const SketchTable& p) -> std::uint64_t { return p.table.size() * 4; },
                               [](const IndexSet& p) -> std::uint64_t { return p.idx.size() * 4; }},
                    payload);
}

}  // namespace sketchps
