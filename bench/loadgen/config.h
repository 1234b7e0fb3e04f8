// One configuration of the load generator's sweep (mode, scheme, P) and the job spec it runs.
//
// A configuration is bound exactly as `sketchps run` binds a job: the embedded default job
// (job/job_spec.h) with the user's --set overrides, then the configuration's own keys (mode, workers,
// servers, model, scheme.name, scheme.density). Overrides of another scheme's section
// ("scheme.topk.x=1" while running gs_sgd) are dropped, so one override list serves a whole sweep.
//
// The pseudo-scheme gtopk_tree is gtopk with the peers' tree merge (PeerConfig::gtopk_tree, which no
// job key selects): decentralized mode only. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/loadgen/synth.h"
#include "job/job_spec.h"

namespace sketchps::bench {

inline constexpr char kTreeVariant[] = "gtopk_tree";

// --params: a synthetic flat layout of N parameters (one layer "flat.weight" of shape [N], job model
// custom), so that d is not tied to the built-in models. Bounds of the flag.
inline constexpr std::uint64_t kMinFlatParams = 1000;
inline constexpr std::uint64_t kMaxFlatParams = 200000000;
inline constexpr char kFlatLayerName[] = "flat.weight";

// The job spec overrides of a flat layout of n parameters: model=custom and its layers.
std::vector<std::string> FlatLayoutOverrides(std::uint64_t n);

struct ConfigSpec {
  std::string mode = "ps";    // ps | decentralized
  std::string scheme;         // a registered scheme, or gtopk_tree (decentralized)
  std::uint32_t workers = 4;  // P
  std::uint32_t servers = 2;  // S: server processes (ps) or shard ranges (decentralized)
  std::string model = "cnn";  // the job's model: its layer table is the gradient's layout
  std::uint64_t params = 0;   // > 0: a flat layout of this many parameters instead of `model`
  double density = 0.01;
  std::uint64_t warmup_rounds = 2;     // untimed, first
  std::uint64_t rounds = 5;            // timed
  std::vector<std::string> overrides;  // job spec overrides, key=value
  std::string gradients_dir;           // "": synthetic gradients; else grad-r*-w*.skgd dumps
  double correlation = kDefaultCorrelation;
  std::uint64_t seed = 1;                            // synthetic gradients
  double epoch = 10;                                 // RoundInfo.epoch of every round
  std::string server_bin;                            // ps: the sketchps-server executable
  std::string work_dir;                              // job.yaml, server logs and port files (created)
  double timeout_seconds = 900;                      // the whole configuration, setup included
  double stream_bytes_per_second = 0;                // the yardstick, copied into the figures
  std::function<void(const std::string&)> progress;  // one line per event (may be empty)
};

// The registered scheme the configuration runs: spec.scheme, or "gtopk" for gtopk_tree.
// InvalidArgument naming the field: mode not ps/decentralized, gtopk_tree in ps mode, an unknown
// scheme, workers or servers 0.
absl::StatusOr<std::string> RegisteredScheme(const ConfigSpec& spec);

// The job spec of the configuration (see the header comment). Errors: RegisteredScheme's, and the
// job spec's own (a bad override names its key).
absl::StatusOr<JobSpec> ConfigJob(const ConfigSpec& spec);

// "ps gs_sgd P=16": how progress lines and errors name a configuration.
std::string ConfigName(const ConfigSpec& spec);

}  // namespace sketchps::bench
