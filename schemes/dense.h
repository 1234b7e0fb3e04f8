// Dense baseline: every round sends the whole gradient; the aggregate is the mean gradient.
// One phase, kDenseSum. Bytes up per worker per round: 4 * dim (2 * dim with scheme.values f16 or
// bf16). Global momentum in the optimizer.
#pragma once

#include <memory>

#include "engine/scheme.h"

namespace sketchps {

std::unique_ptr<Scheme> MakeDenseScheme(SchemeContext ctx);

}  // namespace sketchps
