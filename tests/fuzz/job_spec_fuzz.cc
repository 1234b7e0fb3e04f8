// Fuzz harness: job specs (job/job_spec.h), read by every daemon and by `sketchps run`:
// bytes -> YAML text, then after a NUL byte "--set" overrides one per line -> ParseJobSpec.
// Invariants: refusals are named; an accepted spec re-parses from its effective YAML to the same
// fingerprint, worker and server counts and total rounds.
#include "absl/strings/str_split.h"
#include "fuzz/fuzz_target.h"
#include "job/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sketchps;
  constexpr char kHarness[] = "job_spec_fuzz";
  const std::string_view text = fuzz::AsText(data, size);
  const std::size_t nul = text.find('\0');
  const std::string yaml(text.substr(0, nul));
  std::vector<std::string> overrides;
  if (nul != std::string_view::npos) {
    for (absl::string_view line :
         absl::StrSplit(absl::string_view(text.data() + nul + 1, text.size() - nul - 1), '\n', absl::SkipEmpty()))
      overrides.emplace_back(line);
  }
  auto job = ParseJobSpec(yaml, "fuzz.yaml", overrides);
  fuzz::RequireNamed(job.status(), kHarness);
  if (!job.ok()) return 0;
  auto again = ParseJobSpec(job->effective_yaml, "effective.yaml");
  fuzz::Require(again.ok(), kHarness,
                "the effective YAML of an accepted spec does not parse: " + again.status().ToString());
  fuzz::Require(again->fingerprint == job->fingerprint && again->workers == job->workers &&
                    again->servers == job->servers && again->total_rounds() == job->total_rounds(),
                kHarness, "a spec changed when re-read from its effective YAML");
  fuzz::NoteAccepted();
  return 0;
}
