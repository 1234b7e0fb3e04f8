// The scheme registry: scheme names -> their configuration readers and constructors. This is the only
// place that lists the methods; servers and reductions never see these names.
//
// A job spec's scheme section looks like
//   scheme:
//     name: gs_sgd          # one of SchemeNames()
//     density: 0.01         # k = density x range length (per shard)
//     dense_warmup: 0       # dense rounds first (every scheme): a span, e.g. 100 rounds or 5%
//                           # (common/config/job_span.h); warmup_rounds: N is the older spelling of N rounds
//     diagnostics: false    # true: every compressed round also sums the inputs densely and
//                           # reports how G_t compares (engine/scheme.h RoundDiagnostics)
//     values: f32           # f32 | f16 | bf16: precision of the gradient values each worker pushes
//                           # (dense and sparse payloads; schemes/scheme_base.h "Values on the wire")
//     gs_sgd: {rows: 5}     # the method's own section, read by its config's Read()
// and ParseSchemeSection() turns it into a BoundScheme that builds Scheme instances.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/config_reader.h"
#include "engine/scheme.h"

namespace sketchps {

struct BoundScheme {
  std::string name;
  double density = 0.01;
  SchemeMaker make;
  bool global_momentum = true;   // whether the replicated optimizer applies momentum (scheme.h)
  bool reduction_state = false;  // whether the scheme keeps state with the reduction (scheme.h)
  // Capability: why a worker that joins mid-job (ps.elastic) cannot take part in this configuration,
  // "" when it can; names the key where one decides. A method's config says it
  // (ElasticRefusal(section)); nothing outside this folder tests for a method's name.
  std::string elastic_refusal;
};

// What reading a method's own section gives: the maker, and the capabilities of that configuration.
struct SchemeBinding {
  SchemeMaker make;
  std::string elastic_refusal;  // see BoundScheme
};

struct SchemeEntry {
  const char* name;
  const char* summary;
  // Reads `section` (the scheme's own mapping, e.g. scheme.gs_sgd) and returns a bound maker.
  std::function<absl::StatusOr<SchemeBinding>(ConfigReader& section)> read;
};

// Every scheme, in documentation order.
const std::vector<SchemeEntry>& Schemes();
std::vector<std::string> SchemeNames();

// Reads the job spec's `scheme` mapping. Errors name the key ("scheme.name: unknown scheme 'gsgd'
// (known: ...)", "scheme.gs_sgd.rows: ...").  Every scheme the result makes has ctx.clock = clock, so
// its schedules fit the job (the default clock: 1 round per epoch, length unknown).
absl::StatusOr<BoundScheme> ParseSchemeSection(ConfigReader& scheme, const JobClock& clock = {});

}  // namespace sketchps
