// Top-k with error feedback (docs/methods.md, topk): a = e + g; send TopK(a, k); e = a - sent.
// One phase, kSparseSum over the union. Bytes up per worker per round: 8k (u32 index + f32 value).
// Global momentum in the optimizer. State: the residual e.
#pragma once

#include <memory>

#include "engine/scheme.h"

namespace sketchps {

std::unique_ptr<Scheme> MakeTopKEfScheme(SchemeContext ctx);

}  // namespace sketchps
