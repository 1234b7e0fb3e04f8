#include "schemes/registry.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/wire/codec.h"
#include "schemes/dense.h"
#include "schemes/dgc.h"
#include "schemes/fetchsgd.h"
#include "schemes/gs_sgd.h"
#include "schemes/gtopk.h"
#include "schemes/scalecom.h"
#include "schemes/sdagc.h"
#include "schemes/sidco.h"
#include "schemes/sketched_sgd.h"
#include "schemes/topk_ef.h"

namespace sketchps {
namespace {

// Binds a config type C (with Read(ConfigReader&)) to its Make function. A config that has
// ElasticRefusal() declares when it cannot take a worker joining mid-job; others always can.
template <class C, class MakeFn>
std::function<absl::StatusOr<SchemeBinding>(ConfigReader&)> Reader(MakeFn make) {
  return [make](ConfigReader& section) -> absl::StatusOr<SchemeBinding> {
    C config;
    SKETCHPS_RETURN_IF_ERROR(config.Read(section));
    SchemeBinding binding;
    binding.make = SchemeMaker([make, config](SchemeContext ctx) { return make(std::move(ctx), config); });
    if constexpr (requires { config.ElasticRefusal(section); }) {
      binding.elastic_refusal = config.ElasticRefusal(section);
    }
    return binding;
  };
}

// scheme.values: "f32", "f16" or "bf16"; the error names the key.
absl::StatusOr<ValueEncoding> ReadValues(ConfigReader& scheme) {
  std::string name = "f32";
  SKETCHPS_RETURN_IF_ERROR(scheme.Get("values", name));
  for (const ValueEncoding e : {ValueEncoding::kF32, ValueEncoding::kF16, ValueEncoding::kBF16}) {
    if (name == ValueEncodingName(e)) return e;
  }
  return absl::InvalidArgumentError(absl::StrCat(scheme.KeyPath("values"), ": '", name, "' is not f32, f16 or bf16"));
}

struct NoConfig {
  absl::Status Read(ConfigReader& section) { return section.Finish(); }
};

}  // namespace

const std::vector<SchemeEntry>& Schemes() {
  static const std::vector<SchemeEntry> entries = {
      {"dense", "uncompressed baseline: the mean gradient",
       Reader<NoConfig>([](SchemeContext ctx, const NoConfig&) { return MakeDenseScheme(std::move(ctx)); })},
      {"topk", "top-k with error feedback",
       Reader<NoConfig>([](SchemeContext ctx, const NoConfig&) { return MakeTopKEfScheme(std::move(ctx)); })},
      {"gs_sgd", "gs-SGD: sketch of e + g, exact values at p2*k candidates, global momentum",
       Reader<GsSgdConfig>(MakeGsSgdScheme)},
      {"sketched_sgd", "Sketched-SGD: sketch of the local momentum-corrected accumulator, p2*k candidates",
       Reader<SketchedSgdConfig>(MakeSketchedSgdScheme)},
      {"fetchsgd", "FetchSGD: stateless workers send S(g); momentum and error sketches kept with the reduction",
       Reader<FetchSgdConfig>(MakeFetchSgdScheme)},
      {"dgc", "DGC: local momentum correction, sampled-threshold top-k", Reader<DgcConfig>(MakeDgcScheme)},
      {"sdagc", "SDAGC: per-layer std thresholds, local momentum", Reader<SdagcConfig>(MakeSdagcScheme)},
      {"gtopk", "gTop-k: global top-k of the summed local top-k sets, EF", Reader<GTopKConfig>(MakeGTopKScheme)},
      {"scalecom", "ScaleCom: cyclic leader's top-k, filtered EF", Reader<ScaleComConfig>(MakeScaleComScheme)},
      {"sidco", "SIDCo: fitted-distribution threshold, EF", Reader<SidcoConfig>(MakeSidcoScheme)},
  };
  return entries;
}

std::vector<std::string> SchemeNames() {
  std::vector<std::string> names;
  for (const auto& e : Schemes()) names.push_back(e.name);
  return names;
}

absl::StatusOr<BoundScheme> ParseSchemeSection(ConfigReader& scheme, const JobClock& clock) {
  BoundScheme bound;
  bound.name = "topk";  // the default job's method (job/job_spec.cc)
  SKETCHPS_RETURN_IF_ERROR(scheme.Get("name", bound.name));
  SKETCHPS_RETURN_IF_ERROR(scheme.Get("density", bound.density));
  bool diagnostics = false;  // scheme.diagnostics: compare every round with the exact sum (scheme.h)
  SKETCHPS_RETURN_IF_ERROR(scheme.Get("diagnostics", diagnostics));
  SKETCHPS_ASSIGN_OR_RETURN(const ValueEncoding values, ReadValues(scheme));
  JobSpan dense_warmup;  // scheme.dense_warmup, or the round-1 count scheme.warmup_rounds
  SKETCHPS_RETURN_IF_ERROR(
      ReadSpanOrLegacy(scheme, "dense_warmup", "warmup_rounds", JobSpan::Unit::kRounds, dense_warmup).status());
  const auto warmup_rounds = static_cast<std::uint64_t>(std::ceil(dense_warmup.Rounds(clock)));
  if (!(bound.density > 0.0 && bound.density <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(scheme.KeyPath("density"), " must be in (0, 1], got ", bound.density));
  }
  const SchemeEntry* entry = nullptr;
  for (const auto& e : Schemes()) {
    if (bound.name == e.name) entry = &e;
  }
  if (entry == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(scheme.KeyPath("name"), ": unknown scheme '", bound.name,
                                                   "' (known: ", absl::StrJoin(SchemeNames(), ", "), ")"));
  }
  for (const auto& e : Schemes()) {
    if (e.name != bound.name && scheme.Has(e.name)) {
      return absl::InvalidArgumentError(absl::StrCat(scheme.KeyPath(e.name), ": section for scheme '", e.name,
                                                     "' but scheme.name is '", bound.name, "'"));
    }
  }
  SKETCHPS_ASSIGN_OR_RETURN(ConfigReader section, scheme.Child(bound.name));
  SKETCHPS_ASSIGN_OR_RETURN(SchemeBinding binding, entry->read(section));
  bound.elastic_refusal = binding.elastic_refusal;
  bound.make = [make = std::move(binding.make), warmup_rounds, clock, diagnostics, values](SchemeContext ctx) {
    ctx.warmup_rounds = warmup_rounds;
    ctx.diagnostics = diagnostics;
    ctx.values = values;
    ctx.clock = clock;
    return make(std::move(ctx));
  };
  SKETCHPS_RETURN_IF_ERROR(scheme.Finish());
  SchemeContext probe;
  probe.dim = 1;
  probe.k = 1;
  const auto probed = bound.make(probe);
  bound.global_momentum = probed->uses_global_momentum();
  bound.reduction_state = probed->reduction_state();
  return bound;
}

}  // namespace sketchps
