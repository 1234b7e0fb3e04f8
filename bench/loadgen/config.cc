#include "bench/loadgen/config.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "schemes/registry.h"

namespace sketchps::bench {
namespace {

// True for "scheme.<name>.<key>=..." where <name> is a registered scheme other than `scheme`.
bool ForOtherScheme(const std::string& override_kv, const std::string& scheme, const std::vector<std::string>& names) {
  for (const auto& n : names) {
    if (n != scheme && absl::StartsWith(override_kv, absl::StrCat("scheme.", n, "."))) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> FlatLayoutOverrides(std::uint64_t n) {
  return {"model=custom", absl::StrCat("layers=[[\"", kFlatLayerName, "\", [", n, "]]]")};
}

absl::StatusOr<std::string> RegisteredScheme(const ConfigSpec& spec) {
  if (spec.mode != "ps" && spec.mode != "decentralized") {
    return absl::InvalidArgumentError(absl::StrCat("--mode: '", spec.mode, "' is not ps or decentralized"));
  }
  if (spec.workers == 0) return absl::InvalidArgumentError("--workers: must be >= 1");
  if (spec.servers == 0) return absl::InvalidArgumentError("--servers: must be >= 1");
  if (spec.scheme == kTreeVariant) {
    if (spec.mode != "decentralized") {
      return absl::InvalidArgumentError("gtopk_tree: the tree merge is a decentralized-mode collective");
    }
    return std::string("gtopk");
  }
  const auto names = SchemeNames();
  if (std::find(names.begin(), names.end(), spec.scheme) == names.end()) {
    return absl::InvalidArgumentError(absl::StrCat("--schemes: unknown scheme '", spec.scheme,
                                                   "' (known: ", absl::StrJoin(names, ", "), ", ", kTreeVariant, ")"));
  }
  return spec.scheme;
}

absl::StatusOr<JobSpec> ConfigJob(const ConfigSpec& spec) {
  SKETCHPS_ASSIGN_OR_RETURN(const std::string scheme, RegisteredScheme(spec));
  const auto names = SchemeNames();
  std::vector<std::string> overrides;
  for (const auto& o : spec.overrides) {
    if (!ForOtherScheme(o, scheme, names)) overrides.push_back(o);
  }
  overrides.push_back(absl::StrCat("job_id=loadgen-", spec.mode, "-", spec.scheme, "-p", spec.workers));
  overrides.push_back(absl::StrCat("mode=", spec.mode));
  overrides.push_back(absl::StrCat("workers=", spec.workers));
  overrides.push_back(absl::StrCat("servers=", spec.servers));
  if (spec.params > 0) {
    for (auto& o : FlatLayoutOverrides(spec.params)) overrides.push_back(std::move(o));
  } else {
    overrides.push_back(absl::StrCat("model=", spec.model));
  }
  overrides.push_back(absl::StrCat("scheme.name=", scheme));
  overrides.push_back(absl::StrFormat("scheme.density=%.17g", spec.density));
  return ParseJobSpec(DefaultJobSpecYaml(), "loadgen job", overrides);
}

std::string ConfigName(const ConfigSpec& spec) {
  return absl::StrCat(spec.mode, " ", spec.scheme, " P=", spec.workers);
}

}  // namespace sketchps::bench
