// `sketchps loadgen`: how every scheme's traffic scales with the number of workers P, measured on
// the real servers and the real peer collectives with synthetic workers (no model, no libtorch).
//
//   sketchps loadgen --mode ps,decentralized --workers 4,8,16,32,64 --schemes topk,gs_sgd
//                    --warmup-rounds 20 --rounds 5 --out sweep.json
//
// For each configuration (mode, scheme, P) of the sweep (bench/loadgen/config_run.h runs one):
//   ps             S real `sketchps-server` processes on 127.0.0.1, P workers as threads of a child
//                  process, each with its own transport and Replica;
//   decentralized  P Peer services and aggregators in the child process (peer::StartPeers per
//                  worker); the pseudo-scheme gtopk_tree is gtopk with the peers' tree merge.
//
// The sweep (bench/loadgen/sweep.h) runs each configuration in a child `sketchps loadgen --single
// mode:scheme:P` process with a deadline: a configuration that fails or times out is reported with
// its error and the sweep goes on. Progress goes to stderr (configuration i of n, elapsed time and
// an estimate of the rest, every round); the result is a table on stdout, JSON with --json, or a
// JSON file with --out. Bad options are refused before anything starts (ValidateOptions), exit 2.
// Time figures come from whatever machine runs it; byte figures do not depend on speed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/loadgen/config.h"
#include "bench/loadgen/synth.h"

// CLI11 is header-only and costs every includer 5 to 6 s of parsing; callers that build a command
// line include <CLI/CLI.hpp> themselves.
namespace CLI {
class App;
}  // namespace CLI

namespace sketchps::bench {

struct LoadgenOptions {
  std::vector<std::string> modes = {"ps"};                  // --mode: ps, decentralized (comma list)
  std::vector<std::uint32_t> workers = {4, 8, 16, 32, 64};  // --workers
  std::uint32_t servers = 2;                                // --servers (ps: processes; decentralized: ranges)
  std::vector<std::string> schemes;                         // --schemes (empty: every registered scheme)
  std::string model = "cnn";                                // --model: mlp | cnn | resnet | vgg (the layout)
  std::uint64_t params = 0;                                 // --params N: a flat layout instead of --model
  double density = 0.01;                                    // --density
  std::uint64_t rounds = 5;                                 // --rounds (timed)
  std::uint64_t warmup_rounds = 2;                          // --warmup-rounds (untimed, first)
  std::vector<std::string> overrides;                       // --set key=value (job spec)
  std::string gradients_dir;                                // --gradients: grad-r*-w*.skgd
  std::string bin_dir;                                      // --bin-dir: where sketchps-server is
  double correlation = kDefaultCorrelation;                 // --correlation
  std::uint64_t seed = 1;                                   // --seed (gradients)
  double epoch = 10;                                        // --epoch: RoundInfo.epoch of every round
  double timeout_seconds = 900;                             // --timeout-seconds per configuration
  bool json = false;                                        // --json: JSON on stdout
  std::string out;                                          // --out FILE: JSON
  std::string work_dir;                                     // --work-dir (default: a new /tmp dir)
  bool calibrate = false;                                   // --calibrate: the union table, no sweep
  // Internal (the sweep's child processes).
  std::string single;                  // --single mode:scheme:P
  double stream_bytes_per_second = 0;  // --stream-bytes-per-second
};

// The default scheme list: every registered scheme, in registry order.
std::vector<std::string> DefaultSchemes();

// Everything that can be checked before a sweep starts, so that a typo does not surface as the
// same failure in every configuration 10 minutes later. InvalidArgument naming the flag: an empty
// or unknown mode, scheme or model; P outside [1, 1024]; gtopk_tree without --mode decentralized;
// --rounds 0; --params outside [kMinFlatParams, kMaxFlatParams] or with fewer parameters than
// --servers; a --set that the job spec refuses for some scheme; --gradients without dumps (or
// with dumps of another layout); --out or --work-dir that cannot be written.
absl::Status ValidateOptions(const LoadgenOptions& options);

// The sweep's configurations, in order: modes, then schemes, then P (gtopk_tree in decentralized
// mode only).
std::vector<ConfigSpec> SweepConfigs(const LoadgenOptions& options);

// Registers the `loadgen` subcommand on `app`.
CLI::App* AddLoadgenCommand(CLI::App& app, LoadgenOptions& options);

// Runs it. Exit codes: 0 every configuration measured; 1 some failed (the others are reported);
// 2 bad options; 130 interrupted (the configurations measured so far are reported).
int RunLoadgen(const LoadgenOptions& options);

}  // namespace sketchps::bench
