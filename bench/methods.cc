// The primitives `sketchps bench` times, one Method each (see workspace.h).
#include <cstdint>

#include "bench/workspace.h"
#include "common/status.h"
#include "kernels/select.h"

namespace sketchps::bench {
namespace {

constexpr std::uint64_t kPairBytes = sizeof(std::uint32_t) + sizeof(float);

Outcome Selection(std::uint64_t count) { return Outcome{count, count * kPairBytes}; }

absl::StatusOr<Outcome> RunTopK(Workspace& ws) {
  SKETCHPS_ASSIGN_OR_RETURN(auto count, kernels::TopK(ws.grad.data(), ws.d, ws.k, ws.out_idx.data(),
                                                      ws.out_val.data(), ws.exec));
  return Selection(count);
}

}  // namespace

const std::vector<Method>& Methods() {
  static const std::vector<Method> methods = {
      {"topk", nullptr, RunTopK},
  };
  return methods;
}

}  // namespace sketchps::bench
